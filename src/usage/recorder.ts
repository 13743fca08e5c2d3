import { BatchedFront, takeDropped, type RecorderOptions } from '../batch/recorder.js'
import { monthBounds, zonedDayClock, type DayBounds } from '../quota/month.js'
import type { UsageBatch, UsageStore } from './store.js'

// SPEC §5 "usage over time" for bases, counted on the request path: one map increment per
// admitted call, written to the store by a BatchedRecorder every FLUSH_MS (at most 5 s apart:
// a killed process loses at most its last interval), never a store call per request, never a
// call counted twice. Memory is bounded whatever the number of bases: past MAX_SUBJECTS in one
// batch, a base not yet counted in it is not counted (its calls are told in `dropped`).
// Instances sharing a store add up. A team's days are its ledger's (usage/ledger-recorder.ts).

export const FLUSH_MS = 2000
export const MAX_SUBJECTS = 50_000

/** The batch counts gather in, with its bound's tally. */
interface Open {
  batch: UsageBatch
  subjects: number
  calls: number
  dropped: number
}

export interface UsageRecorderOptions extends RecorderOptions {
  /** monthly.timezone in force (days are its days). */
  timezone: () => string
  maxSubjects?: number
}

export class UsageRecorder extends BatchedFront<Open> {
  private readonly dayOf = zonedDayClock(() => this.opts.timezone())
  /** The day and counts the last call found (a compare per call while the day lasts). */
  private day: DayBounds | null = null
  private counts: Map<string, number> | null = null
  private countsOf: Open | null = null
  private readonly maxSubjects: number

  constructor(
    store: UsageStore,
    private readonly opts: UsageRecorderOptions
  ) {
    super(
      {
        empty: () => ({ batch: new Map(), subjects: 0, calls: 0, dropped: 0 }),
        isEmpty: (o) => o.batch.size === 0,
        weight: (o) => o.calls,
        takeDropped,
        write: (o, id) => store.add(o.batch, id),
      },
      opts
    )
    this.maxSubjects = opts.maxSubjects ?? MAX_SUBJECTS
  }

  /** An admitted call of a base (its 32-hex UUID). */
  record(uuid: string, nowMs: number): void {
    const open = this.recorder.batch
    const counts = this.countsAt(open, nowMs)
    open.calls++
    const had = counts.get(uuid)
    if (had !== undefined) return void counts.set(uuid, had + 1)
    if (open.subjects >= this.maxSubjects) return void open.dropped++
    counts.set(uuid, 1)
    open.subjects++
  }

  /** This day's counts in the open batch (a compare per call; the day is worked out once a day). */
  private countsAt(open: Open, nowMs: number): Map<string, number> {
    const d = this.day
    if (d !== null && this.countsOf === open && nowMs >= d.startMs && nowMs < d.endMs)
      return this.counts!
    const day = this.dayOf(nowMs)
    let entry = open.batch.get(day.id)
    if (entry === undefined) {
      entry = { monthEndMs: monthBounds(nowMs, this.opts.timezone()).endMs, counts: new Map() }
      open.batch.set(day.id, entry)
    }
    this.day = day
    this.countsOf = open
    this.counts = entry.counts
    return entry.counts
  }

  override start(everyMs = FLUSH_MS): void {
    super.start(everyMs)
  }

  /** Bases counted in the open batch (tests, the memory bound). */
  get size(): number {
    return this.recorder.batch.subjects
  }
}
