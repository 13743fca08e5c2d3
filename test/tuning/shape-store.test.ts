import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/load.js'
import { compileSnapshot } from '../../src/http/snapshot.js'
import { ShapeRecorder } from '../../src/tuning/recorder.js'
import { tuneReport } from '../../src/tuning/report.js'
import {
  addToHour,
  BINS_PER_HOUR,
  coarsen,
  decodeHour,
  encodedLength,
  encodeFreshHour,
  encodeHour,
  HOUR_CAP,
  LEVEL_FACTORS,
  type Hour,
} from '../../src/tuning/shape.js'
import {
  MEMORY_SERIES_DAYS,
  MemoryShapeStore,
  RedisShapeStore,
  type ShapeStore,
} from '../../src/tuning/shape-store.js'
import { FakeClock } from '../helpers/clock.js'
import { useRedis } from '../helpers/redis.js'
import { seeded } from './traffic.js'

// SPEC §11 "what is kept": the hour's encoding, its coarsening, the script that writes it in
// Redis (the same bytes as the JavaScript's), and instances that add up to one.

const db = useRedis()

const randomBins = (rnd: () => number, n: number, max: number) => {
  const m = new Map<number, number>()
  for (let i = 0; i < n; i++) {
    const b = Math.floor(rnd() * BINS_PER_HOUR)
    m.set(b, (m.get(b) ?? 0) + 1 + Math.floor(rnd() * max))
  }
  return m
}

describe('an hour of a key-day (tuning/shape.ts)', () => {
  it('encodes a fresh hour from its bins to the very bytes of the long way', () => {
    const rnd = seeded(7)
    for (const [n, max] of [
      [1, 1],
      [5, 3],
      [64, 1000],
      [65, 2],
      [400, 5],
    ] as const) {
      const bins = randomBins(rnd, n, max)
      expect(encodeFreshHour(bins)).toEqual(encodeHour(addToHour(null, bins)))
    }
    expect(encodeFreshHour(new Map([[719, 300]]))).toEqual(
      encodeHour(addToHour(null, new Map([[719, 300]])))
    )
  })

  it('encodes and decodes to the same counts, dense or sparse, whichever is smaller', () => {
    const rnd = seeded(3)
    for (const [n, max] of [
      [0, 1],
      [3, 1],
      [50, 3],
      [720, 200],
      [2000, 40000],
    ] as const) {
      const h = addToHour(null, randomBins(rnd, n, max))
      const enc = encodeHour(h)
      expect(decodeHour(enc)).toEqual(h)
      expect(enc.length).toBeLessThanOrEqual(HOUR_CAP)
    }
    // A few calls take a few bytes; a busy hour at most the dense list.
    expect(encodeHour(addToHour(null, new Map([[5, 1]]))).length).toBeLessThan(6)
  })

  it("tells an encoding's length without building it, at every level and for every count size", () => {
    const rnd = seeded(13)
    for (const [n, max] of [
      [0, 1],
      [1, 1],
      [40, 127],
      [40, 128],
      [300, 20_000],
      [720, 3],
      [2000, 2 ** 31],
    ] as const) {
      const fine = addToHour(null, randomBins(rnd, n, max))
      for (let level = fine.level; level < LEVEL_FACTORS.length; level++) {
        const h = coarsen(fine, level)
        expect(encodedLength(h)).toBe(encodeHour(h).length)
      }
    }
  })

  it('a fresh hour of up to 292 bins fits at level 0 whatever its counts (no length asked)', () => {
    // 292 bins of the largest count a bin holds, spread over the hour.
    const widest = new Map(Array.from({ length: 292 }, (_, i) => [i * 2 + 1, 2 ** 32 - 1]))
    const h = addToHour(null, widest)
    expect(h.level).toBe(0)
    expect(encodeHour(h).length).toBeLessThanOrEqual(HOUR_CAP)
    // And random ones, as wide (the bound is the worst a gap and a count can take, so loose).
    const rnd = seeded(19)
    for (let i = 0; i < 50; i++) {
      const bins = new Map<number, number>()
      while (bins.size < 292) bins.set(Math.floor(rnd() * BINS_PER_HOUR), 2 ** 32 - 1 - i)
      expect(encodeHour(addToHour(null, bins)).length).toBeLessThanOrEqual(HOUR_CAP)
    }
  })

  it('past HOUR_CAP an hour is kept coarser, and the level it ends at does not depend on the order of the adds', () => {
    const rnd = seeded(9)
    // A flood: thousands of calls a second in every bin (no real key's hour needs more than 5 s).
    const parts = Array.from({ length: 8 }, () => randomBins(rnd, 700, 100_000))
    const inOrder = parts.reduce<Hour | null>((h, p) => addToHour(h, p), null)!
    const reversed = [...parts].reverse().reduce<Hour | null>((h, p) => addToHour(h, p), null)!
    expect(inOrder.level).toBeGreaterThan(0)
    expect(reversed).toEqual(inOrder)
    const fine = new Uint32Array(BINS_PER_HOUR)
    for (const p of parts) for (const [b, n] of p) fine[b]! += n
    expect(inOrder).toEqual(coarsen({ level: 0, counts: fine }, inOrder.level))
  })
})

const batchOf = (day: string, sid: string, hours: Map<number, Map<number, number>>) =>
  new Map([
    [
      day,
      {
        dayEndMs: Date.parse(`${day}T00:00:00Z`) + 86_400_000,
        series: new Map([[sid, { total: 0, refusedRate: 0, refusedMonthly: 0, hours }]]),
      },
    ],
  ])

describe('the store of shapes', () => {
  it('Redis (shape-add.lua) keeps the very hours the JavaScript does, coarsened alike, once per batch id', async () => {
    const redis = new RedisShapeStore(db.client(), `${db.redis.prefix}lua:`)
    const memory = new MemoryShapeStore()
    const rnd = seeded(11)
    const sid = 'base:0a000000000000000000000000000001\tGET /api-gateway/api/v2/dtables/<u>/rows/'
    for (let seq = 1; seq <= 8; seq++) {
      const hours = new Map([
        [9, randomBins(rnd, 700, seq > 4 ? 100_000 : 5)],
        [23, randomBins(rnd, 3, 2)],
      ])
      const b = batchOf('2026-11-20', sid, hours)
      await redis.add(b, { instance: 'p', seq })
      await memory.add(b, { instance: 'p', seq })
    }
    // A batch written again (it timed out but landed) changes nothing.
    await redis.add(batchOf('2026-11-20', sid, new Map([[9, new Map([[0, 5]])]])), {
      instance: 'p',
      seq: 8,
    })
    const fromRedis = (await redis.read('2026-11-20', [sid])).get(sid)!
    const fromMemory = (await memory.read('2026-11-20', [sid])).get(sid)!
    expect(fromRedis.hours.get(9)!.level).toBeGreaterThan(0)
    expect(fromRedis).toEqual(fromMemory)
    expect((await redis.seriesOf('2026-11-20', 10)).series).toEqual([sid])
  })

  it('reads many key-days in one call each as the in-memory store does: kept hours, logs not yet folded, absent keys', async () => {
    const redis = new RedisShapeStore(db.client(), `${db.redis.prefix}many:`)
    const memory = new MemoryShapeStore()
    const rnd = seeded(17)
    const sids = Array.from(
      { length: 300 },
      (_, i) => `base:0b${String(i).padStart(30, '0')}\tGET /api-gateway/api/v2/dtables/<u>/rows/`
    )
    for (let seq = 1; seq <= 3; seq++) {
      const series = new Map(
        sids
          .filter((_, i) => i % 7 !== 0) // every seventh never written: absent from the answer
          .map((sid, i) => [
            sid,
            {
              total: seq + i,
              refusedRate: i % 3,
              refusedMonthly: i % 2,
              // Some hours pass the log's cap and are folded, most stay a log.
              hours: new Map([
                [i % 24, randomBins(rnd, i % 11 === 0 ? 400 : 2, 50)],
                [(i + 5) % 24, randomBins(rnd, 1, 3)],
              ]),
            },
          ])
      )
      const b = new Map([['2026-11-21', { dayEndMs: Date.parse('2026-11-22T00:00:00Z'), series }]])
      await redis.add(b, { instance: 'p', seq })
      await memory.add(b, { instance: 'p', seq })
    }
    const fromRedis = await redis.read('2026-11-21', sids)
    const fromMemory = await memory.read('2026-11-21', sids)
    expect(fromRedis.size).toBe(sids.length - Math.ceil(sids.length / 7))
    expect(fromRedis).toEqual(fromMemory)
  })

  it('the same calls through two instances give the same report as through one', async () => {
    const yaml = (base: string) => `rate_limits: { base: ${base} }`
    const snap = (y: string) => {
      const r = parseConfig(y, {})
      if (!r.ok) throw new Error('config')
      return compileSnapshot(r.config)
    }
    const START = Date.parse('2026-11-20T08:00:00Z')
    const rnd = seeded(5)
    const calls = Array.from({ length: 6000 }, (_, i) => ({
      at: START + Math.floor(rnd() * 6 * 3_600_000),
      key: `base:0a00000000000000000000000000000${i % 3}`,
      family:
        i % 5 === 0
          ? 'POST /api-gateway/api/v2/dtables/<u>/sql/'
          : 'GET /api-gateway/api/v2/dtables/<u>/rows/',
    })).sort((a, b) => a.at - b.at)
    const clock = new FakeClock(START)
    const stores: ShapeStore[] = [
      new RedisShapeStore(db.client(), `${db.redis.prefix}one:`),
      new RedisShapeStore(db.client(), `${db.redis.prefix}two:`),
    ]
    const one = new ShapeRecorder(stores[0]!, { instance: 'solo', clock, timezone: () => 'UTC' })
    const a = new ShapeRecorder(stores[1]!, { instance: 'a', clock, timezone: () => 'UTC' })
    const b = new ShapeRecorder(stores[1]!, { instance: 'b', clock, timezone: () => 'UTC' })
    for (const [i, c] of calls.entries()) {
      one.record(c.key, c.family, c.at, null)
      ;(i % 2 === 0 ? a : b).record(c.key, c.family, c.at, null)
      // Each writes on its own rhythm: the two instances' batches interleave.
      if (i % 700 === 0) await a.flush()
      if (i % 1100 === 0) await b.flush()
      if (i % 900 === 0) await one.flush()
    }
    await Promise.all([one.flush(), a.flush(), b.flush()])
    const reportOf = (store: ShapeStore) =>
      tuneReport({
        running: snap(yaml('30/min')),
        candidate: snap(yaml('12/min')),
        store,
        days: 1,
        nowMs: START + 12 * 3_600_000,
        detail: true,
      })
    const solo = await reportOf(stores[0]!)
    const pair = await reportOf(stores[1]!)
    expect(pair).toEqual(solo)
    expect(solo.sections[0]!.calls).toBe(6000)
    expect(solo.sections[0]!.candidate_refused.hi).toBeGreaterThan(0)
  })
})

describe('a report over a store that fails (SPEC §11)', () => {
  it("is refused with the store's error, whichever chunk it fails on, and the read ahead is never an unhandled rejection", async () => {
    const snap = (y: string) => {
      const r = parseConfig(y, {})
      if (!r.ok) throw new Error('config')
      return compileSnapshot(r.config)
    }
    const DAY = '2026-11-20'
    const series = new Map(
      Array.from({ length: 1000 }, (_, i) => [
        `base:0c${String(i).padStart(30, '0')}\tGET /api-gateway/api/v2/dtables/<u>/rows/`,
        {
          total: 3,
          refusedRate: 0,
          refusedMonthly: 0,
          hours: new Map([[9, new Map([[i % 720, 3]])]]),
        },
      ])
    )
    // Reads are made a chunk ahead: the failing one is read while an earlier one is judged.
    for (const failOn of [1, 2, 4]) {
      const store = new MemoryShapeStore()
      await store.add(new Map([[DAY, { dayEndMs: Date.parse('2026-11-21T00:00:00Z'), series }]]), {
        instance: 'p',
        seq: 1,
      })
      let reads = 0
      const read = store.read.bind(store)
      // The failing read answers at once, the others later: it fails while one is awaited.
      store.read = async (day, ids) => {
        if (++reads === failOn) throw new Error(`read ${failOn} failed`)
        await new Promise((r) => setTimeout(r, 5))
        return read(day, ids)
      }
      const unhandled: unknown[] = []
      const onUnhandled = (e: unknown) => unhandled.push(e)
      process.on('unhandledRejection', onUnhandled)
      try {
        await expect(
          tuneReport({
            running: snap('rate_limits: { base: 30/min }'),
            candidate: snap('rate_limits: { base: 12/min }'),
            store,
            days: 1,
            nowMs: Date.parse('2026-11-20T12:00:00Z'),
          })
        ).rejects.toThrow(`read ${failOn} failed`)
        await new Promise((r) => setImmediate(r))
      } finally {
        process.off('unhandledRejection', onUnhandled)
      }
      expect(reads).toBeGreaterThanOrEqual(failOn)
      expect(unhandled).toEqual([])
    }
  })
})

describe('the in-memory store of shapes (no store.url)', () => {
  it('holds at most MEMORY_SERIES_DAYS key-days, forgetting the stalest, in under 450 bytes of heap each', async () => {
    // Measured in a process of its own, on the built code, with a real collection before each
    // reading: 150,000 light key-days (a few calls in each of three hours) added in batches.
    const script = `
      const { MemoryShapeStore } = await import(${JSON.stringify(new URL('../../dist/src/tuning/shape-store.js', import.meta.url).href)})
      const store = new MemoryShapeStore()
      const used = () => { globalThis.gc(); globalThis.gc(); return process.memoryUsage().heapUsed }
      const before = used()
      for (let b = 0; b < 15; b++) {
        const series = new Map()
        for (let i = 0; i < 10000; i++) {
          const n = b * 10000 + i
          const key = 'base:' + n.toString(16).padStart(8, '0') + '0d3b4c599a513e2d7c8b9a10'
          series.set(key + '\\tGET /api-gateway/api/v2/dtables/<u>/rows/', {
            total: 9, refusedRate: 0, refusedMonthly: 0,
            hours: new Map([[8, new Map([[n % 720, 3]])], [12, new Map([[7, 2], [400, 1]])], [17, new Map([[0, 3]])]]),
          })
        }
        await store.add(new Map([['2026-11-20', { dayEndMs: 0, series }]]), { instance: 'p', seq: b + 1 })
      }
      const first = await store.read('2026-11-20', ['base:000000000d3b4c599a513e2d7c8b9a10\\tGET /api-gateway/api/v2/dtables/<u>/rows/'])
      const last = await store.read('2026-11-20', ['base:000249ef0d3b4c599a513e2d7c8b9a10\\tGET /api-gateway/api/v2/dtables/<u>/rows/'])
      process.stdout.write(JSON.stringify({ size: store.size, mb: (used() - before) / 2 ** 20, first: first.size, last: last.get([...last.keys()][0])?.hours.get(12)?.counts[400] }))
    `
    const { execFileSync } = await import('node:child_process')
    const out = JSON.parse(
      execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
        encoding: 'utf8',
      })
    ) as { size: number; mb: number; first: number; last: number }
    console.log(`in-memory shapes: ${out.size} key-days held in ${out.mb.toFixed(1)} MB of heap`)
    expect(out.size).toBe(MEMORY_SERIES_DAYS)
    expect(out.first).toBe(0) // the stalest forgotten
    expect(out.last).toBe(1) // the newest kept, its counts intact
    // A decoded hour is 720 counts (2.9 KB): kept so, these key-days took 9 KB each.
    expect((out.mb * 2 ** 20) / out.size).toBeLessThan(450)
  }, 60_000)
})
