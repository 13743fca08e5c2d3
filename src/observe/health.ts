// SPEC §7 "The server's and the store's state": failing or answering, told the same way on the
// page, in /v1/status, in the log and in /metrics. A state with a start (since when) and, once
// over, how long it lasted, as HAProxy's stats page shows `lastchg` beside a server that went
// down. One machine for both, with hysteresis, so a recovery under steady traffic is told once:
// - failing after FALL failed calls in a row, or (the server) when at least half of the last
//   10 s of calls failed (MIN_CALLS at least), counting only calls that ended after the last
//   recovery: the failures of an episode that ended never start a new one;
// - answering again after RISE good calls in a row (HAProxy's fall 3, rise 2);
// - an episode's length runs from its first failure to the call that ended it.

export const FALL = 3
export const RISE = 2
/** The window the share of failures is measured over. */
export const WINDOW_MS = 10_000
/** Calls in the window before its share of failures is judged. */
const MIN_CALLS = 4
/** Episodes kept for the page and /v1/status. */
export const EPISODES = 10

/** One episode that ended: from its first failure to the call that ended it. */
export interface Episode {
  start_ms: number
  end_ms: number
  lasted_s: number
  /** The last failure's words (the store's own, or the server's status and error). */
  error: string | null
}

/** A state as the page shows it. */
export interface HealthView {
  /** failing: the episode is on; ok: it is not. */
  state: 'ok' | 'failing'
  /** When the episode began (its first failure, epoch ms), while it is on. */
  since_ms: number | null
  /** The last failure's words, while failing (the store's own: `OOM command not allowed …`). */
  error: string | null
  /** The last episode that ended (the newest of `episodes`), or null. */
  last: Episode | null
  /** The last EPISODES episodes that ended, newest first. */
  episodes: Episode[]
}

export const HEALTHY: HealthView = {
  state: 'ok',
  since_ms: null,
  error: null,
  last: null,
  episodes: [],
}

export interface HealthOptions {
  /** Judge the share of failures over WINDOW_MS too (the server), not only failures in a row. */
  share?: boolean
  /** Told once as an episode starts and once as it ends (the log lines, SPEC §7). */
  onChange?: (failing: boolean, view: HealthView) => void
}

/** One target's calls, judged as they come (a call: a compare and a few adds). */
export class HealthMachine {
  private failedInARow = 0
  private okInARow = 0
  /** The first failure of the current run of failures in a row. */
  private runStartMs = 0
  /** Calls since the last recovery within WINDOW_MS, per second: [second, calls, failures]. */
  private window: [number, number, number][] = []
  /** The window's failures, summed as they come and go: a call with none to judge reads no window. */
  private windowFailures = 0
  private since: number | null = null
  private error: string | null = null
  private readonly episodes: Episode[] = []

  constructor(private readonly opts: HealthOptions = {}) {}

  /** One call's end: whether it failed, and the failure's words. */
  seen(nowMs: number, failed: boolean, error: string | null = null): void {
    if (this.opts.share === true) this.count(nowMs, failed)
    if (failed) {
      if (this.failedInARow === 0) this.runStartMs = nowMs
      this.failedInARow++
      this.okInARow = 0
      this.error = error
    } else {
      this.okInARow++
      this.failedInARow = 0
    }
    if (this.since === null) {
      const start = this.failedInARow >= FALL ? this.runStartMs : this.mostlyFailingSince()
      if (start !== null) {
        this.since = start
        this.opts.onChange?.(true, this.view())
      }
    } else if (this.okInARow >= RISE) {
      const lastedS = Math.round((nowMs - this.since) / 100) / 10
      this.episodes.unshift({
        start_ms: this.since,
        end_ms: nowMs,
        lasted_s: lastedS,
        error: this.error,
      })
      if (this.episodes.length > EPISODES) this.episodes.length = EPISODES
      this.since = null
      this.error = null
      // What the episode's calls said is over: only calls after this recovery are judged.
      this.window = []
      this.windowFailures = 0
      this.opts.onChange?.(false, this.view())
    }
  }

  /** The first failure of the current run of failures in a row (null when the last call answered). */
  runSince(): number | null {
    return this.failedInARow > 0 ? this.runStartMs : null
  }

  private count(nowMs: number, failed: boolean): void {
    const s = Math.floor(nowMs / 1000)
    let last = this.window[this.window.length - 1]
    if (last === undefined || last[0] !== s) {
      this.window.push((last = [s, 0, 0]))
      while (this.window.length > 0 && this.window[0]![0] * 1000 <= nowMs - WINDOW_MS)
        this.windowFailures -= this.window.shift()![2]
    }
    last[1]++
    if (failed) {
      last[2]++
      this.windowFailures++
    }
  }

  /** When the window's first failure came, if at least half of its calls failed; else null. */
  private mostlyFailingSince(): number | null {
    // SPEC §12: the common call (no failure in the window) reads nothing more.
    if (this.opts.share !== true || this.windowFailures === 0) return null
    let calls = 0
    let failures = 0
    let first: number | null = null
    for (const [s, c, f] of this.window) {
      calls += c
      failures += f
      if (f > 0 && first === null) first = s * 1000
    }
    return calls >= MIN_CALLS && failures * 2 >= calls ? first : null
  }

  get failing(): boolean {
    return this.since !== null
  }

  view(): HealthView {
    return {
      state: this.since === null ? 'ok' : 'failing',
      since_ms: this.since,
      error: this.since === null ? null : this.error,
      last: this.episodes[0] ?? null,
      episodes: [...this.episodes],
    }
  }
}

/** Several processes' views as one (a primary's workers): failing when any is, since the earliest. */
export function mergeHealth(views: readonly HealthView[]): HealthView {
  let since: number | null = null
  let error: string | null = null
  const episodes: Episode[] = []
  for (const v of views) {
    if (v.since_ms !== null && (since === null || v.since_ms < since)) {
      since = v.since_ms
      error = v.error
    }
    episodes.push(...v.episodes)
  }
  // One outage seen by several workers is one episode: the earliest start, the latest end.
  episodes.sort((a, b) => a.start_ms - b.start_ms)
  const merged: Episode[] = []
  for (const e of episodes) {
    const prev = merged[merged.length - 1]
    if (prev !== undefined && e.start_ms <= prev.end_ms) {
      if (e.end_ms > prev.end_ms) {
        prev.end_ms = e.end_ms
        prev.lasted_s = Math.round((prev.end_ms - prev.start_ms) / 100) / 10
      }
    } else merged.push({ ...e })
  }
  merged.reverse()
  if (merged.length > EPISODES) merged.length = EPISODES
  return {
    state: since === null ? 'ok' : 'failing',
    since_ms: since,
    error,
    last: merged[0] ?? null,
    episodes: merged,
  }
}
