// A synthetic traffic for SPEC §11's accuracy test: several keys with steady callers on a daily
// rhythm, bursts, a quiet one, calls of two route families, over several days. Seeded, so every
// run is the same traffic; times are the clock's, never waited for.

export interface Arrival {
  atMs: number
  method: string
  path: string
  /** The client's address. */
  ip: string
}

/** A small seeded generator (mulberry32). */
export function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export const BASES = {
  steady: '0a000000-0d3b-4c59-9a51-3e2d7c8b9a10',
  bursty: '0b000000-0d3b-4c59-9a51-3e2d7c8b9a10',
  both: '0c000000-0d3b-4c59-9a51-3e2d7c8b9a10',
  quiet: '0d000000-0d3b-4c59-9a51-3e2d7c8b9a10',
  sqlish: '0e000000-0d3b-4c59-9a51-3e2d7c8b9a10',
} as const

const rows = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`
const sql = (u: string) => `/api-gateway/api/v2/dtables/${u}/sql/`
const row = (u: string, id: string) => `/api-gateway/api/v2/dtables/${u}/rows/${id}/`

/**
 * `days` days from `startMs` (a day's start). Steady callers follow a daily rhythm (busiest in
 * the afternoon); bursts come every 20 to 60 minutes in working hours; `sqlish` mixes SQL calls
 * with row calls. Returns the arrivals in time order.
 */
export function traffic(startMs: number, days: number, seed = 7): Arrival[] {
  const rnd = seeded(seed)
  const out: Arrival[] = []
  const DAY = 86_400_000
  const steady = (_u: string, perMinPeak: number, paths: (r: number) => string, ip: string) => {
    for (let t = startMs; t < startMs + days * DAY;) {
      const hourOfDay = ((t - startMs) % DAY) / 3_600_000
      // Nobody calls from 22:00 to 6:00; the afternoon is busiest.
      if (hourOfDay < 6 || hourOfDay >= 22) {
        t += (hourOfDay < 6 ? 6 - hourOfDay : 30 - hourOfDay) * 3_600_000
        continue
      }
      const rhythm = 0.15 + 0.85 * Math.sin(((hourOfDay - 6) / 16) * Math.PI)
      const perMs = (perMinPeak * rhythm) / 60_000
      t += -Math.log(1 - rnd()) / perMs
      if (t >= startMs + days * DAY) break
      out.push({ atMs: Math.floor(t), method: 'GET', path: paths(rnd()), ip })
    }
  }
  const bursts = (u: string, size: number, spanMs: number, ip: string) => {
    for (let d = 0; d < days; d++) {
      let t = startMs + d * DAY + 8 * 3_600_000
      while (t < startMs + d * DAY + 18 * 3_600_000) {
        const n = Math.floor(size * (0.5 + rnd()))
        for (let i = 0; i < n; i++)
          out.push({ atMs: Math.floor(t + rnd() * spanMs), method: 'GET', path: rows(u), ip })
        t += (20 + rnd() * 40) * 60_000
      }
    }
  }
  const rowId = (r: number) => `Qtf7xPmoRaiFyQPO1a${String(Math.floor(r * 1e4)).padStart(4, '0')}`
  steady(BASES.steady, 20, () => rows(BASES.steady), '10.0.0.1')
  bursts(BASES.bursty, 40, 40_000, '10.0.0.2')
  steady(BASES.both, 8, (r) => (r < 0.3 ? row(BASES.both, rowId(r)) : rows(BASES.both)), '10.0.0.3')
  bursts(BASES.both, 20, 20_000, '10.0.0.3')
  steady(BASES.quiet, 0.3, () => rows(BASES.quiet), '10.0.0.4')
  steady(BASES.sqlish, 10, (r) => (r < 0.4 ? sql(BASES.sqlish) : rows(BASES.sqlish)), '10.0.0.5')
  for (const a of out) if (a.path.endsWith('/sql/')) a.method = 'POST'
  return out.sort((a, b) => a.atMs - b.atMs)
}
