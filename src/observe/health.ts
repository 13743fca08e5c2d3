// Issue #41: what the operator watches tells the truth within seconds. A problem is a state
// with a start (since when) and, once over, how long it lasted, as HAProxy's stats page shows
// `lastchg` beside a server that went down. For the server behind basegate: failing after
// FALL failed calls in a row, or when at least half of the last 10 s of calls failed (4 at
// least); answering again after RISE good calls in a row (HAProxy's fall 3, rise 2).

export const FALL = 3
export const RISE = 2
/** The window the share of failures is measured over. */
const WINDOW_S = 10

/** A problem as the page shows it: now, and the last one that ended. */
export interface HealthView {
  /** failing: the problem is on; ok: it is not. */
  state: 'ok' | 'failing'
  /** When the problem began (epoch ms), while it is on. */
  since_ms: number | null
  /** The last problem that ended: when, and how long it lasted. */
  last: { start_ms: number; end_ms: number } | null
}

export const HEALTHY: HealthView = { state: 'ok', since_ms: null, last: null }

/** One problem's episodes: on since when, and the last that ended. */
export class Episodes {
  private since: number | null = null
  private last: { start_ms: number; end_ms: number } | null = null

  begin(nowMs: number): void {
    this.since ??= nowMs
  }

  end(nowMs: number): void {
    if (this.since === null) return
    this.last = { start_ms: this.since, end_ms: nowMs }
    this.since = null
  }

  get on(): boolean {
    return this.since !== null
  }

  view(): HealthView {
    return { state: this.since === null ? 'ok' : 'failing', since_ms: this.since, last: this.last }
  }
}

/** The server's calls, judged as they come (each call one compare and a few adds). */
export class UpstreamHealth {
  private readonly episodes = new Episodes()

  constructor(
    /** Told when the server starts failing, and when it answers again (how long it lasted). */
    private readonly onChange: (failing: boolean, view: HealthView) => void = () => {}
  ) {}
  private failedInARow = 0
  private okInARow = 0
  /** Per second of the last WINDOW_S: [second, calls, failures]. */
  private readonly window: [number, number, number][] = []

  seen(nowMs: number, failed: boolean): void {
    const s = Math.floor(nowMs / 1000)
    let last = this.window[this.window.length - 1]
    if (last === undefined || last[0] !== s) {
      this.window.push((last = [s, 0, 0]))
      while (this.window.length > 0 && this.window[0]![0] <= s - WINDOW_S) this.window.shift()
    }
    last[1]++
    if (failed) {
      last[2]++
      this.failedInARow++
      this.okInARow = 0
    } else {
      this.okInARow++
      this.failedInARow = 0
    }
    if (!this.episodes.on && (this.failedInARow >= FALL || this.mostlyFailing())) {
      this.episodes.begin(nowMs)
      this.onChange(true, this.episodes.view())
    } else if (this.episodes.on && this.okInARow >= RISE) {
      this.episodes.end(nowMs)
      this.onChange(false, this.episodes.view())
    }
  }

  private mostlyFailing(): boolean {
    let calls = 0
    let failures = 0
    for (const [, c, f] of this.window) {
      calls += c
      failures += f
    }
    return calls >= 4 && failures * 2 >= calls
  }

  view(): HealthView {
    return this.episodes.view()
  }
}

/** Several processes' views as one (a primary's workers): failing when any is, since the earliest. */
export function mergeHealth(views: readonly HealthView[]): HealthView {
  let since: number | null = null
  let last: HealthView['last'] = null
  for (const v of views) {
    if (v.since_ms !== null && (since === null || v.since_ms < since)) since = v.since_ms
    if (v.last !== null && (last === null || v.last.end_ms > last.end_ms)) last = v.last
  }
  return { state: since === null ? 'ok' : 'failing', since_ms: since, last }
}
