// The V8 options basegate runs with wherever this project starts it: the image's NODE_OPTIONS
// (deploy/Dockerfile, and so compose and Kubernetes), the systemd unit, `npm start` and the
// bench. A test checks that each of them carries exactly this.
//
// --max-semi-space-size=16 (MiB): Node 24 lets the young generation's semispace grow to 64 MiB.
// At that size a proxy's scavenges took 10 to 110 ms each at half its top rate (the minor GC
// pauses an operator's p99 meets): between two scavenges, calls that were promoted while in
// flight die in the old generation, and their pointers keep the next calls' young objects
// alive until a full collection, so each scavenge copied 2 to 10 MB. Capped at 16 MiB they are
// a few times more frequent and copy a tenth of it: the longest pause fell to 9-19 ms, the
// event loop's longest delay from 54-119 ms to 39-60 ms, and calls a second at saturation did
// not move (both at once: 1.012 rotating, 1.003 flood). docs/benchmarks.md has the runs.
export const NODE_OPTIONS = '--max-semi-space-size=16'
