import { BatchedFront, takeDropped, type RecorderOptions } from '../batch/recorder.js'
import { zonedDayClock } from '../quota/month.js'
import { CEILING } from './family.js'
import { BIN_MS, BINS_PER_HOUR } from './shape.js'
import { seriesId, type SeriesDay, type ShapeBatch, type ShapeStore } from './shape-store.js'

// SPEC §11 "what is kept", counted on the request path: per call, one map lookup and two
// increments (its key-day and its 5-second bin), written with the day counts (the same flush
// interval, once per batch id, never a store call per request). Memory is bounded: past
// MAX_SERIES key-days in one batch, a key-day not yet in it is not counted (told in `dropped`).

export const MAX_SERIES = 50_000

/** What one key-day gathered: its calls by 5-second bin of the day (split by hour when written). */
interface Gathered {
  total: number
  refusedRate: number
  refusedMonthly: number
  bins: Map<number, number>
}

interface Open {
  /** Day → key → family → what it gathered. */
  batch: Map<string, { dayEndMs: number; series: Map<string, Map<string, Gathered>> }>
  series: number
  calls: number
  dropped: number
}

function count(g: Gathered, bin: number, refused: Refused): void {
  g.total++
  if (refused === 'rate') g.refusedRate++
  else if (refused === 'monthly') g.refusedMonthly++
  g.bins.set(bin, (g.bins.get(bin) ?? 0) + 1)
}

/** The batch as the store takes it: `<key>\t<family>` per key-day, its bins by hour. */
function batchOf(o: Open): ShapeBatch {
  const out: ShapeBatch = new Map()
  for (const [day, { dayEndMs, series }] of o.batch) {
    const flat = new Map<string, SeriesDay>()
    for (const [key, families] of series)
      for (const [family, g] of families) {
        const hours = new Map<number, Map<number, number>>()
        for (const [bin, n] of g.bins) {
          const hour = Math.floor(bin / BINS_PER_HOUR)
          let h = hours.get(hour)
          if (h === undefined) hours.set(hour, (h = new Map()))
          h.set(bin % BINS_PER_HOUR, n)
        }
        flat.set(seriesId(key, family), { ...g, hours })
      }
    out.set(day, { dayEndMs, series: flat })
  }
  return out
}

export interface ShapeRecorderOptions extends RecorderOptions {
  /** monthly.timezone in force (days are its days). */
  timezone: () => string
  maxSeries?: number
}

/** How a call ended at the windows: admitted, or refused by a rate limit or by the month. */
export type Refused = 'rate' | 'monthly' | null

interface Place {
  open: Open | null
  key: string
  family: string
  g: Gathered | null
  bin: number
  binStartMs: number
}

const emptyPlace = (): Place => ({
  open: null,
  key: '',
  family: '',
  g: null,
  bin: 0,
  binStartMs: 0,
})

export class ShapeRecorder extends BatchedFront<Open> {
  private readonly dayOf = zonedDayClock(() => this.opts.timezone())
  private readonly maxSeries: number
  /**
   * Where the last calls of a key went, by kind (a base's own series, a client's ip_ceiling
   * series: a call usually records one of each, so one slot would always miss), reused while
   * the key, family, bin and batch stay the same. Written in place: no object per call.
   */
  private readonly places: [Place, Place] = [emptyPlace(), emptyPlace()]
  constructor(
    store: ShapeStore,
    private readonly opts: ShapeRecorderOptions
  ) {
    super(
      {
        empty: () => ({ batch: new Map(), series: 0, calls: 0, dropped: 0 }),
        isEmpty: (o) => o.batch.size === 0,
        weight: (o) => o.calls,
        takeDropped,
        write: (o, id) => store.add(batchOf(o), id),
      },
      opts
    )
    this.maxSeries = opts.maxSeries ?? MAX_SERIES
  }

  /** A call a key's windows saw (`key`: base:<uuid> or ip:<key>; `family`: tuning/family.ts). */
  record(key: string, family: string, nowMs: number, refused: Refused): void {
    const open = this.recorder.batch
    // A flood repeats one key and family within one bin: the last call's place, reused.
    const last = this.places[family === CEILING ? 1 : 0]
    if (
      last.open === open &&
      nowMs >= last.binStartMs &&
      nowMs < last.binStartMs + BIN_MS &&
      family === last.family &&
      key === last.key
    ) {
      open.calls++
      count(last.g!, last.bin, refused)
      return
    }
    const day = this.dayOf(nowMs)
    let entry = open.batch.get(day.id)
    if (entry === undefined) {
      entry = { dayEndMs: day.endMs, series: new Map() }
      open.batch.set(day.id, entry)
    }
    open.calls++
    // Two lookups of strings the request already holds: no key is built per call.
    let families = entry.series.get(key)
    if (families === undefined) entry.series.set(key, (families = new Map()))
    let s = families.get(family)
    if (s === undefined) {
      if (open.series >= this.maxSeries) return void open.dropped++
      s = { total: 0, refusedRate: 0, refusedMonthly: 0, bins: new Map() }
      families.set(family, s)
      open.series++
    }
    const bin = Math.floor((nowMs - day.startMs) / BIN_MS)
    count(s, bin, refused)
    last.open = open
    last.key = key
    last.family = family
    last.g = s
    last.bin = bin
    last.binStartMs = day.startMs + bin * BIN_MS
  }

  /** Key-days in the open batch (the memory bound's test). */
  get size(): number {
    return this.recorder.batch.series
  }
}
