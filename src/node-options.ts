// The V8 options basegate runs with wherever this project starts it: the image's NODE_OPTIONS
// (deploy/Dockerfile, and so compose and Kubernetes), the systemd unit, `npm start` and the
// bench. A test checks that each of them carries exactly this.
//
// --max-semi-space-size=16 (MiB): Node 24 lets the young generation's semispace grow to 64 MiB.
// At that size a proxy's scavenges at half its top rate took 9-53 ms (a run's median) and up
// to 110 ms, pauses every call in flight waits out: calls promoted while in flight die in the
// old generation, and their pointers keep the next calls' young objects alive until a full
// collection, so each scavenge copied 2 to 10 MB. Capped at 16 MiB they come a few times more
// often and copy a fraction of that: a run's longest took 9-19 ms, the event loop's longest
// delay 39-60 ms against 54-119, and calls a second at saturation did not move (both at once:
// 1.012 rotating, 1.003 flood). CHANGELOG 0.7.10 has the runs.
export const NODE_OPTIONS = '--max-semi-space-size=16'
