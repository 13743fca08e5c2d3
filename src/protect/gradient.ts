// SPEC §9 `max_in_flight: auto`: a gradient controller on the time to response headers.
//
// Followed: Envoy's adaptive concurrency filter for what is compared (the median of each short
// sampling interval against the unloaded time) and how the unloaded time is kept honest, and
// Netflix concurrency-limits' Gradient2 for the update (the ceiling moves by the gradient
// between the two times plus a small queue allowance, smoothed; not raised while unused).
//
// The unloaded time is the lower of a low percentile (p10) of the interval medians of the last
// three minutes and the last probe. A passive estimate alone drifts: under a lasting flood every
// call runs at the ceiling, the medians are all loaded ones, and Gradient2's moving average
// (or any percentile of them) climbs, taking the ceiling with it (a simulation showed 1.7× the
// server's capacity within a minute). So, as Envoy does, while calls are clearly slower than
// the unloaded time, at most every 30 s, the ceiling is pinned to min_in_flight until a few
// calls that started under it came back: their median is the probe.

/** The ceiling's bounds (SPEC §9: between min_in_flight and 1000). */
export const MAX_CEILING = 1000
/** A sampling interval ends after this long, once it holds enough samples. */
const INTERVAL_MS = 250
const MIN_SAMPLES = 5
/** How long interval medians are kept for the baseline. */
const BASELINE_MS = 180_000
const BASELINE_PERCENTILE = 0.1
/** Recent time up to this factor of the unloaded one is "not clearly above it". */
const TOLERANCE = 1.1
/** How far one interval moves the ceiling towards its new value (Gradient2's smoothing). */
const SMOOTHING = 0.5
/** Samples kept per interval (a reservoir beyond it: the median stays fair, memory bounded). */
const MAX_INTERVAL_SAMPLES = 512
/** A probe at most this often, only while overloaded. */
const PROBE_EVERY_MS = 30_000
/** Calls a probe waits for; it gives up (and keeps the last unloaded time) after PROBE_MAX_MS. */
const PROBE_SAMPLES = 8
const PROBE_MAX_MS = 2_000

export interface CeilingState {
  ceiling: number
  /** The baseline: p10 of interval medians over three minutes (ms); null before the first. */
  unloadedMs: number | null
  /** The last interval's median (ms); null before the first. */
  recentMs: number | null
}

export class AdaptiveCeiling {
  private value: number
  private samples: number[] = []
  private seen = 0
  private intervalStart: number
  /** The most calls in flight during this interval: a ceiling nobody used is not raised. */
  private peakInFlight = 0
  private medians: { atMs: number; ms: number }[] = []
  private unloaded: number | null = null
  private recent: number | null = null
  /** While probing: when it began, and the times of calls that started after that. */
  private probe: { startMs: number; samples: number[] } | null = null
  private lastProbeMs = -Infinity
  private probed: number | null = null

  constructor(
    private min: number,
    nowMs: number,
    /** Where it starts: low, so a cold start never floods a slow server; it doubles quickly. */
    initial = min
  ) {
    this.value = Math.min(MAX_CEILING, initial)
    this.intervalStart = nowMs
  }

  /** The ceiling now (a whole number of calls; min_in_flight while probing). */
  get ceiling(): number {
    return this.probe === null ? Math.floor(this.value) : this.min
  }

  state(): CeilingState {
    return { ceiling: this.ceiling, unloadedMs: this.unloaded, recentMs: this.recent }
  }

  /** A reload changed min_in_flight. */
  setMin(min: number): void {
    this.min = min
    if (this.value < min) this.value = min
  }

  /** Calls in flight now (after a call took its slot): the interval's peak. */
  observeInFlight(n: number): void {
    if (n > this.peakInFlight) this.peakInFlight = n
  }

  /**
   * One call's time to its response headers. Returns true when the ceiling moved (the caller
   * then hands out any slots it freed).
   */
  sample(ms: number, nowMs: number): boolean {
    if (this.probe !== null) return this.probeSample(ms, nowMs)
    this.seen++
    if (this.samples.length < MAX_INTERVAL_SAMPLES) this.samples.push(ms)
    else {
      const j = Math.floor(Math.random() * this.seen)
      if (j < MAX_INTERVAL_SAMPLES) this.samples[j] = ms
    }
    if (nowMs - this.intervalStart < INTERVAL_MS || this.samples.length < MIN_SAMPLES) return false
    this.update(nowMs)
    return true
  }

  private update(nowMs: number): void {
    const recent = percentile(this.samples, 0.5)
    this.recent = recent
    this.medians.push({ atMs: nowMs, ms: recent })
    while (this.medians.length > 0 && this.medians[0]!.atMs < nowMs - BASELINE_MS)
      this.medians.shift()
    const unloaded = percentile(
      this.medians.map((m) => m.ms),
      BASELINE_PERCENTILE
    )
    const baseline = this.probed === null ? unloaded : Math.min(unloaded, this.probed)
    this.unloaded = baseline
    const limit = this.value
    const gradient = Math.max(0.5, Math.min(2, (TOLERANCE * baseline) / Math.max(recent, 1e-3)))
    if (gradient < 1 && nowMs - this.lastProbeMs >= PROBE_EVERY_MS) {
      this.probe = { startMs: nowMs, samples: [] }
      this.lastProbeMs = nowMs
      return
    }
    // Not raised while the calls never came near it (Gradient2's "app limited" check).
    if (gradient >= 1 && this.peakInFlight < limit / 2) {
      this.reset(nowMs)
      return
    }
    const queue = Math.max(1, Math.log10(limit))
    const target = limit * gradient + queue
    const next = limit * (1 - SMOOTHING) + target * SMOOTHING
    this.value = Math.max(this.min, Math.min(MAX_CEILING, next))
    this.reset(nowMs)
  }

  /** A call came back while probing: only calls that started under the pinned ceiling count. */
  private probeSample(ms: number, nowMs: number): boolean {
    const probe = this.probe!
    if (nowMs - ms >= probe.startMs) probe.samples.push(ms)
    const enough = probe.samples.length >= PROBE_SAMPLES
    if (!enough && nowMs - probe.startMs < PROBE_MAX_MS) return false
    if (enough) this.probed = percentile(probe.samples, 0.5)
    this.probe = null
    this.reset(nowMs)
    return true
  }

  private reset(nowMs: number): void {
    this.samples = []
    this.seen = 0
    this.peakInFlight = 0
    this.intervalStart = nowMs
  }
}

/** The p-th percentile of a list (nearest rank; the list is copied, not sorted in place). */
export function percentile(list: readonly number[], p: number): number {
  const sorted = [...list].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}
