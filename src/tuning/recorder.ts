import { BatchedRecorder, type RecorderOptions } from '../batch/recorder.js'
import { createDayClock, type DayBounds } from '../quota/month.js'
import { BIN_MS, BINS_PER_HOUR } from './shape.js'
import { seriesId, type SeriesDay, type ShapeBatch, type ShapeStore } from './shape-store.js'

// SPEC §11 "what is kept", counted on the request path: per call, one map lookup and two
// increments (its key-day and its 5-second bin), written with the day counts (the same flush
// interval, once per batch id, never a store call per request). Memory is bounded: past
// MAX_SERIES key-days in one batch, a key-day not yet in it is not counted (told in `dropped`).

export const MAX_SERIES = 50_000

interface Open {
  batch: ShapeBatch
  series: number
  calls: number
  dropped: number
}

export interface ShapeRecorderOptions extends RecorderOptions {
  /** monthly.timezone in force (days are its days). */
  timezone: () => string
  maxSeries?: number
  onDropped?: (calls: number) => void
}

/** How a call ended at the windows: admitted, or refused by a rate limit or by the month. */
export type Refused = 'rate' | 'monthly' | null

export class ShapeRecorder {
  private readonly recorder: BatchedRecorder<Open>
  private zone = ''
  private dayOf: (nowMs: number) => DayBounds = () => {
    throw new Error('no zone')
  }
  private readonly maxSeries: number

  constructor(
    store: ShapeStore,
    private readonly opts: ShapeRecorderOptions
  ) {
    this.maxSeries = opts.maxSeries ?? MAX_SERIES
    this.recorder = new BatchedRecorder<Open>(
      {
        empty: () => ({ batch: new Map(), series: 0, calls: 0, dropped: 0 }),
        isEmpty: (o) => o.batch.size === 0,
        weight: (o) => o.calls,
        write: (o, id) => {
          if (o.dropped > 0) {
            this.opts.onDropped?.(o.dropped)
            o.dropped = 0
          }
          return store.add(o.batch, id)
        },
      },
      opts
    )
  }

  /** A call a key's windows saw (`key`: base:<uuid> or ip:<key>; `family`: tuning/family.ts). */
  record(key: string, family: string, nowMs: number, refused: Refused): void {
    const open = this.recorder.batch
    const zone = this.opts.timezone()
    if (zone !== this.zone) {
      this.zone = zone
      this.dayOf = createDayClock(zone)
    }
    const day = this.dayOf(nowMs)
    let entry = open.batch.get(day.id)
    if (entry === undefined) {
      entry = { dayEndMs: day.endMs, series: new Map() }
      open.batch.set(day.id, entry)
    }
    open.calls++
    const id = seriesId(key, family)
    let s: SeriesDay | undefined = entry.series.get(id)
    if (s === undefined) {
      if (open.series >= this.maxSeries) return void open.dropped++
      s = { total: 0, refusedRate: 0, refusedMonthly: 0, hours: new Map() }
      entry.series.set(id, s)
      open.series++
    }
    s.total++
    if (refused === 'rate') s.refusedRate++
    else if (refused === 'monthly') s.refusedMonthly++
    const bin = Math.floor((nowMs - day.startMs) / BIN_MS)
    const hour = Math.floor(bin / BINS_PER_HOUR)
    let bins = s.hours.get(hour)
    if (bins === undefined) s.hours.set(hour, (bins = new Map()))
    const b = bin % BINS_PER_HOUR
    bins.set(b, (bins.get(b) ?? 0) + 1)
  }

  flush(): Promise<boolean> {
    return this.recorder.flush()
  }

  start(everyMs: number): void {
    this.recorder.start(everyMs)
  }

  stop(waitMs = 0): Promise<number> {
    return this.recorder.stop(waitMs)
  }

  /** Key-days in the open batch (the memory bound's test). */
  get size(): number {
    return this.recorder.batch.series
  }
}
