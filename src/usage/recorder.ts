import { every, systemClock, type Clock, type Timer } from '../clock.js'
import { createDayClock, monthBounds, type DayBounds } from '../quota/month.js'
import type { UsageBatch, UsageStore } from './store.js'

// SPEC §5 "usage over time", counted on the request path: two map increments per admitted
// call (its base, its team), written to the store as one pipeline every FLUSH_MS (at most 5 s
// apart: a killed process loses at most its last interval), never a store call per request.
// Memory is bounded whatever the number of bases: past MAX_SUBJECTS in one interval, a base
// not yet counted in it is not counted (its calls are told in `dropped`; teams, bounded by the
// file, always count). Instances sharing a store add up.

export const FLUSH_MS = 2000
export const MAX_SUBJECTS = 50_000

export interface UsageRecorderOptions {
  /** monthly.timezone in force (days are its days). */
  timezone: () => string
  clock?: Clock
  maxSubjects?: number
  /** A write that failed: its counts are kept for the next one (within the same bound). */
  onError?: (err: unknown) => void
  /** Calls of new bases not counted in an interval (past maxSubjects), told once a flush. */
  onDropped?: (calls: number) => void
}

export class UsageRecorder {
  private batch: UsageBatch = new Map()
  private subjects = 0
  private dropped = 0
  private zone = ''
  private dayOf: (nowMs: number) => DayBounds = () => {
    throw new Error('no zone')
  }
  private day: DayBounds | null = null
  private counts: Map<string, number> | null = null
  private timer: Timer | null = null
  private flushing: Promise<void> = Promise.resolve()
  private readonly clock: Clock
  private readonly maxSubjects: number

  constructor(
    private readonly store: UsageStore,
    private readonly opts: UsageRecorderOptions
  ) {
    this.clock = opts.clock ?? systemClock
    this.maxSubjects = opts.maxSubjects ?? MAX_SUBJECTS
  }

  /** An admitted call of a base (its 32-hex UUID) and, when the base has one, its team. */
  record(uuid: string, team: string | undefined, nowMs: number): void {
    const counts = this.countsAt(nowMs)
    this.add(counts, `b:${uuid}`, 1, false)
    if (team !== undefined) this.add(counts, `t:${team}`, 1, true)
  }

  /** `n` calls of a subject; a base new to this interval past the bound is only told of. */
  private add(counts: Map<string, number>, subject: string, n: number, always: boolean): void {
    const had = counts.get(subject)
    if (had !== undefined) return void counts.set(subject, had + n)
    if (!always && this.subjects >= this.maxSubjects) return void (this.dropped += n)
    counts.set(subject, n)
    this.subjects++
  }

  /** This day's counts (a compare per call; the zone's day is worked out once a day). */
  private countsAt(nowMs: number): Map<string, number> {
    const d = this.day
    if (d !== null && nowMs >= d.startMs && nowMs < d.endMs && this.counts !== null)
      return this.counts
    const zone = this.opts.timezone()
    if (zone !== this.zone) {
      this.zone = zone
      this.dayOf = createDayClock(zone)
    }
    const day = this.dayOf(nowMs)
    this.day = day
    let entry = this.batch.get(day.id)
    if (entry === undefined) {
      entry = { monthEndMs: monthBounds(nowMs, zone).endMs, counts: new Map() }
      this.batch.set(day.id, entry)
    }
    this.counts = entry.counts
    return entry.counts
  }

  /** Writes what was counted; a failed write is merged back into the next one. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.batch.size === 0) return
      const batch = this.batch
      const dropped = this.dropped
      this.batch = new Map()
      this.subjects = 0
      this.dropped = 0
      this.day = null
      this.counts = null
      if (dropped > 0) this.opts.onDropped?.(dropped)
      try {
        await this.store.add(batch)
      } catch (err) {
        this.opts.onError?.(err)
        this.merge(batch)
      }
    })
    return this.flushing
  }

  private merge(old: UsageBatch): void {
    for (const [day, { monthEndMs, counts }] of old) {
      let entry = this.batch.get(day)
      if (entry === undefined) this.batch.set(day, (entry = { monthEndMs, counts: new Map() }))
      for (const [subject, n] of counts)
        this.add(entry.counts, subject, n, subject.startsWith('t:'))
    }
  }

  start(everyMs = FLUSH_MS): void {
    this.timer = every(this.clock, everyMs, () => void this.flush())
  }

  async stop(): Promise<void> {
    this.timer?.cancel()
    this.timer = null
    await this.flush()
  }

  /** Subjects counted in the current interval (tests, the memory bound). */
  get size(): number {
    return this.subjects
  }
}
