import type { Clock } from '../clock.js'
import { shownKey } from '../request/base-uuid.js'
// SPEC §7: every 60 s a summary line with the busiest keys and the teams past 80 % of their
// monthly quota. Counting here is a Map increment per request; the line is built on flush.

export interface SummaryLine {
  interval_s: number
  requests: number
  busiest: { key: string; calls: number }[]
  teams_over_80: { team: string; used: number; quota: number; percent: number }[]
  teams_over_100: { team: string; used: number; quota: number; percent: number }[]
}

/** One process's counts since its last take(): what a worker hands its primary. */
export interface SummaryCounts {
  requests: number
  calls: [string, number][]
  teams: [string, { used: number; quota: number }][]
}

export class UsageSummary {
  private calls = new Map<string, number>()
  private total = 0
  private readonly teams = new Map<string, { used: number; quota: number }>()
  private since: number

  constructor(
    private readonly clock: Clock,
    private readonly top = 10,
    private readonly maxKeys = 100_000
  ) {
    this.since = clock.now()
  }

  record(key: string): void {
    this.total++
    const n = this.calls.get(key)
    if (n !== undefined) this.calls.set(key, n + 1)
    // A key-space flood must not grow this map without bound: past the cap, new keys wait.
    else if (this.calls.size < this.maxKeys) this.calls.set(key, 1)
  }

  recordMonthly(team: string, used: number, quota: number): void {
    this.teams.set(team, { used, quota })
  }

  /**
   * The counts so far, busiest `limit` keys only, and a fresh start (workers: the primary adds
   * every worker's counts and writes the one summary line).
   */
  take(limit = 1000): SummaryCounts {
    const calls = [...this.calls].sort((a, b) => b[1] - a[1]).slice(0, limit)
    const out = { requests: this.total, calls, teams: [...this.teams] }
    this.calls = new Map()
    this.total = 0
    this.teams.clear()
    return out
  }

  /** Adds another process's counts; a team's usage is the highest any process saw. */
  absorb(c: SummaryCounts): void {
    this.total += c.requests
    for (const [key, n] of c.calls) {
      const had = this.calls.get(key)
      if (had !== undefined) this.calls.set(key, had + n)
      else if (this.calls.size < this.maxKeys) this.calls.set(key, n)
    }
    for (const [team, t] of c.teams) {
      const had = this.teams.get(team)
      if (had === undefined || t.used >= had.used) this.teams.set(team, t)
    }
  }

  flush(now = this.clock.now()): SummaryLine {
    const busiest = [...this.calls]
      .sort((a, b) => b[1] - a[1])
      .slice(0, this.top)
      .map(([key, calls]) => ({ key: shownKey(key), calls }))
    const over80: SummaryLine['teams_over_80'] = []
    const over100: SummaryLine['teams_over_100'] = []
    for (const [team, t] of this.teams) {
      if (t.quota <= 0) continue
      const percent = Math.round((t.used / t.quota) * 1000) / 10
      if (t.used >= t.quota) over100.push({ team, ...t, percent })
      else if (percent >= 80) over80.push({ team, ...t, percent })
    }
    const line = {
      interval_s: Math.round((now - this.since) / 1000),
      requests: this.total,
      busiest,
      teams_over_80: over80,
      teams_over_100: over100,
    }
    // A team shows in the interval it had calls in (issue #34: a used-up team with no traffic
    // does not warn again every interval; the month's notices say when it crossed).
    this.calls = new Map()
    this.total = 0
    this.teams.clear()
    this.since = now
    return line
  }
}
