import { BUCKETS_PER_WINDOW } from '../types.js'
import { BIN_MS, HOUR_MS, LEVEL_FACTORS, type Hour, type ShapeDay } from './shape.js'

// SPEC §11 "how right": the calls a sliding window (SPEC §3) would have refused, from counts per
// bin, as an interval that is sure to hold the true figure whatever the calls' places inside
// their bins. The true limiter admits the most calls any choice could (admitting a call as soon
// as it fits is optimal when every window counts calls from their arrival), so:
//  - at most: the most that can be admitted when only bins a window of W covers whole are held
//    to L (fewer constraints than the truth), by the same first-fit rule;
//  - at least: what first-fit admits when every bin a window of W + W/50 could touch (a call
//    stays counted up to 1/50 of the window past it, SPEC §3) is held to L (more constraints).
// Refused = calls − admitted, so the two bounds swap. For a window of 8 bins or more (40 s and
// longer at 5-second bins) the two differ by at most 2/(k + 2) of the admitted calls in the
// stretches where the limit bites: at most 20 % of the key's calls. Pure.

/** Calls in [start, end), time ordered, not overlapping. */
export interface Timeline {
  starts: Float64Array
  ends: Float64Array
  counts: Uint32Array
  total: number
}

/** A limit's window. */
export interface Window {
  limit: number
  windowMs: number
}

export interface Bounds {
  /** Calls refused, at least and at most. */
  lo: number
  hi: number
}

/**
 * One timeline of several key-days (the same key's families summed, every day in order): each
 * hour at the coarsest level any of its parts was kept at.
 */
export function timelineOf(
  days: readonly { startMs: number; parts: readonly ShapeDay[] }[]
): Timeline {
  const starts: number[] = []
  const ends: number[] = []
  const calls: number[] = []
  let total = 0
  const sorted = [...days].sort((a, b) => a.startMs - b.startMs)
  for (const d of sorted) {
    const hours = new Set<number>()
    for (const p of d.parts) for (const h of p.hours.keys()) hours.add(h)
    for (const hour of [...hours].sort((a, b) => a - b)) {
      // The hour's parts (most hours have one: its counts are laid out as kept, no sum built).
      let one: Hour | undefined
      let several = false
      let level = 0
      for (const p of d.parts) {
        const h = p.hours.get(hour)
        if (h === undefined) continue
        if (one === undefined) one = h
        else several = true
        level = Math.max(level, h.level)
      }
      const f = LEVEL_FACTORS[level]!
      let counts = one!.counts
      if (several) {
        counts = new Uint32Array(720 / f)
        for (const p of d.parts) {
          const h = p.hours.get(hour)
          if (h === undefined) continue
          const k = f / LEVEL_FACTORS[h.level]!
          for (let i = 0; i < h.counts.length; i++) counts[Math.floor(i / k)]! += h.counts[i]!
        }
      }
      const hourStart = d.startMs + hour * HOUR_MS
      for (let i = 0; i < counts.length; i++) {
        const n = counts[i]!
        if (n === 0) continue
        starts.push(hourStart + i * f * BIN_MS)
        ends.push(hourStart + (i + 1) * f * BIN_MS)
        calls.push(n)
        total += n
      }
    }
  }
  return {
    starts: Float64Array.from(starts),
    ends: Float64Array.from(ends),
    counts: Uint32Array.from(calls),
    total,
  }
}

/**
 * First-fit over the bins under every window at once. `inWindow(w, i, j)`: whether bin i (< j)
 * counts against window w when bin j is admitted.
 */
function firstFit(t: Timeline, windows: readonly Window[], strict: boolean): number {
  const n = t.counts.length
  const admitted = new Float64Array(n)
  // Per window: the first bin still counted, and the admitted calls from it to the bin before j.
  const first = new Int32Array(windows.length)
  const sums = new Float64Array(windows.length)
  let total = 0
  for (let j = 0; j < n; j++) {
    let room = t.counts[j]!
    for (let w = 0; w < windows.length; w++) {
      const { limit, windowMs } = windows[w]!
      if (strict) {
        // Every bin a window of W + W/50 ending in bin j could touch.
        const reach = windowMs + windowMs / BUCKETS_PER_WINDOW
        while (first[w]! < j && t.ends[first[w]!]! <= t.starts[j]! - reach) {
          sums[w]! -= admitted[first[w]!]!
          first[w]!++
        }
      } else {
        // Only the bins that lie within W of bin j's end, whole.
        while (first[w]! < j && t.starts[first[w]!]! < t.ends[j]! - windowMs) {
          sums[w]! -= admitted[first[w]!]!
          first[w]!++
        }
      }
      // A bin longer than the window holds at most L per window length (and its start's part).
      const span = t.ends[j]! - t.starts[j]!
      const own = strict ? limit : limit * Math.ceil(span / windowMs)
      room = Math.min(room, Math.max(0, (span > windowMs ? own : limit) - sums[w]!))
    }
    admitted[j] = room
    total += room
    for (let w = 0; w < windows.length; w++) sums[w]! += room
  }
  return total
}

/** Calls refused by `windows` (all of them checked on each call), between `lo` and `hi`. */
export function refusals(t: Timeline, windows: readonly Window[]): Bounds {
  const live = windows.filter((w) => Number.isFinite(w.limit))
  if (live.length === 0 || t.total === 0) return { lo: 0, hi: 0 }
  const most = firstFit(t, live, false)
  const least = firstFit(t, live, true)
  return { lo: Math.max(0, t.total - most), hi: t.total - least }
}
