// SPEC §11 "what is kept": how a key's calls fell in time on one day, as counts per 5-second
// bin, one field per hour of the day. An hour is kept at the finest of five resolutions (5 s,
// 15 s, 1 min, 5 min, 1 h) whose encoding fits HOUR_CAP bytes; each encoding is the smaller of
// a dense list of counts and a sparse list of (gap, count), in LEB128 varints. So a key-day
// takes at most 25 × HOUR_CAP bytes, and a key with a few calls a few bytes.
//
// The same rules run in the store's script (tuning/shape-add.lua): adding counts never
// makes an encoding shorter, and a coarser one is never longer, so the resolution an hour ends
// at is the finest its final counts fit, whatever order instances wrote them in: the same
// calls through two instances give the same hours. Pure.

/** The finest bin (ms). */
export const BIN_MS = 5000
export const HOUR_MS = 3_600_000
/** Bins of BIN_MS in an hour. */
export const BINS_PER_HOUR = HOUR_MS / BIN_MS
/** Each level's bin, in BIN_MS: 5 s, 15 s, 1 min, 5 min, 1 h. */
export const LEVEL_FACTORS = [1, 3, 12, 60, 720] as const
/** The most bytes one hour's encoding takes before it is kept coarser. */
export const HOUR_CAP = 2048
/** Days kept (SPEC §11). */
export const KEEP_DAYS = 35

/** One hour of a key's day: its resolution and the counts of its bins. */
export interface Hour {
  /** An index into LEVEL_FACTORS. */
  level: number
  /** BINS_PER_HOUR / LEVEL_FACTORS[level] counts. */
  counts: Uint32Array
}

export const binsAt = (level: number): number => BINS_PER_HOUR / LEVEL_FACTORS[level]!

/** Bytes of n as a LEB128 varint. */
const varintBytes = (n: number): number => {
  let b = 1
  while (n >= 128) {
    n = Math.floor(n / 128)
    b++
  }
  return b
}

function varint(out: number[], n: number): void {
  while (n >= 128) {
    out.push((n % 128) + 128)
    n = Math.floor(n / 128)
  }
  out.push(n)
}

/** The smaller of the two encodings of an hour: [level, 0, counts…] or [level, 1, (gap, count)…]. */
export function encodeHour(h: Hour): Buffer {
  const dense: number[] = [h.level, 0]
  const sparse: number[] = [h.level, 1]
  let last = -1
  for (let i = 0; i < h.counts.length; i++) {
    const n = h.counts[i]!
    varint(dense, n)
    if (n === 0) continue
    varint(sparse, i - last)
    varint(sparse, n)
    last = i
  }
  return Buffer.from(sparse.length < dense.length ? sparse : dense)
}

/**
 * Bins a fresh level-0 hour can hold and still fit HOUR_CAP: each a gap (at most 720, two
 * bytes) and a count (a 32-bit count, at most five), after the two-byte head.
 */
const FEW_BINS = Math.floor((HOUR_CAP - 2) / 7)

/** encodeHour(h).length, without building either encoding (the fold asks it at every level). */
export function encodedLength(h: Hour): number {
  let dense = 2
  let sparse = 2
  let last = -1
  for (let i = 0; i < h.counts.length; i++) {
    const n = h.counts[i]!
    if (n < 128) dense++
    else dense += varintBytes(n)
    if (n === 0) continue
    sparse += varintBytes(i - last) + varintBytes(n)
    last = i
  }
  return Math.min(sparse, dense)
}

/**
 * encodeHour of a fresh hour (nothing kept) holding these finest-bin counts: the same bytes,
 * without the 720 counts. Few bins are always sparse at level 0 (at most 64 pairs of varints
 * are shorter than the 722-byte dense list, and than HOUR_CAP); more go the long way.
 */
export function encodeFreshHour(bins: ReadonlyMap<number, number>): Buffer {
  if (bins.size > 64) return encodeHour(addToHour(null, bins))
  const sorted = [...bins].filter(([, n]) => n > 0).sort((a, b) => a[0] - b[0])
  const out: number[] = [0, 1]
  let last = -1
  for (const [bin, n] of sorted) {
    varint(out, bin - last)
    varint(out, n)
    last = bin
  }
  return Buffer.from(out)
}

/** A reader of the LEB128 varints of `b` from byte `at` (`what` names it when cut short). */
function varints(b: Uint8Array, at: number, what: string): { next(): number; more(): boolean } {
  return {
    next(): number {
      let n = 0
      let mul = 1
      for (;;) {
        const byte = b[at++]
        if (byte === undefined) throw new Error(`${what} cut short`)
        n += (byte % 128) * mul
        if (byte < 128) return n
        mul *= 128
      }
    },
    more: () => at < b.length,
  }
}

export function decodeHour(b: Uint8Array): Hour {
  const level = b[0]!
  if (level >= LEVEL_FACTORS.length) throw new Error(`a shape hour at level ${level}`)
  const counts = new Uint32Array(binsAt(level))
  const v = varints(b, 2, 'a shape hour')
  if (b[1] === 0) for (let i = 0; i < counts.length; i++) counts[i] = v.next()
  else {
    let i = -1
    while (v.more()) {
      i += v.next()
      counts[i] = v.next()
    }
  }
  return { level, counts }
}

/** The same hour at a coarser level (counts summed). */
export function coarsen(h: Hour, level: number): Hour {
  if (level === h.level) return h
  const k = LEVEL_FACTORS[level]! / LEVEL_FACTORS[h.level]!
  const counts = new Uint32Array(binsAt(level))
  for (let i = 0; i < h.counts.length; i++) counts[Math.floor(i / k)]! += h.counts[i]!
  return { level, counts }
}

/**
 * Adds an hour's finest-bin counts (bin → calls) to what is kept, and keeps the sum at the
 * finest level, from the kept one on, whose encoding fits HOUR_CAP.
 */
export function addToHour(kept: Hour | null, bins: ReadonlyMap<number, number>): Hour {
  // One array per call (a fresh hour's is the copy): an hour's 2.9 KB is most of a fold's cost.
  let h: Hour =
    kept === null
      ? { level: 0, counts: new Uint32Array(BINS_PER_HOUR) }
      : { level: kept.level, counts: kept.counts.slice() }
  const f = LEVEL_FACTORS[h.level]!
  for (const [bin, n] of bins) h.counts[Math.floor(bin / f)]! += n
  // A fresh hour of at most FEW_BINS bins fits at level 0 whatever its counts: no length to ask.
  if (kept === null && bins.size <= FEW_BINS) return h
  while (h.level < LEVEL_FACTORS.length - 1 && encodedLength(h) > HOUR_CAP)
    h = coarsen(h, h.level + 1)
  return h
}

/** A log of (finest bin, calls) varint pairs (shape-add.lua's `aHH`), as bins. */
export function decodeLog(b: Uint8Array): Map<number, number> {
  const out = new Map<number, number>()
  const v = varints(b, 0, 'a shape log')
  while (v.more()) {
    const bin = v.next()
    out.set(bin, (out.get(bin) ?? 0) + v.next())
  }
  return out
}

/** Of one key's day: calls seen, refused by the running limits (rate, monthly), and its hours. */
export interface ShapeDay {
  total: number
  refusedRate: number
  refusedMonthly: number
  /** By hour of the day since its start (0 to 24: a day of a clock change has 23 or 25). */
  hours: Map<number, Hour>
}
