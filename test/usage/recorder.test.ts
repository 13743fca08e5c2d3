import { allBases } from '../helpers/stores.js'
import v8 from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { MAX_SUBJECTS, UsageRecorder } from '../../src/usage/recorder.js'
import {
  MemoryUsageStore,
  RedisUsageStore,
  dayRows,
  monthsOf,
  type UsageStore,
} from '../../src/usage/store.js'
import { FakeClock } from '../helpers/clock.js'
import { useRedis } from '../helpers/redis.js'

// Issues #33, #40: a base's day counts in this process, bounded in memory whatever the number
// of bases, written to a real redis-server once per batch (nothing counted twice).

const db = useRedis()
const T = Date.parse('2026-11-25T10:00:00Z')
const uuid = (i: number) => i.toString(16).padStart(32, '0')
const rssMb = () => process.memoryUsage().rss / 2 ** 20
v8.setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void
/** The heap that survives a full collection (what the process holds, not its garbage). */
const retainedMb = () => {
  gc()
  return process.memoryUsage().heapUsed / 2 ** 20
}
const options = (clock = new FakeClock(T)) => ({
  instance: 'test',
  clock,
  timezone: () => 'UTC',
})

describe('the day counts in this process (issues #33, #40)', () => {
  it('200,000 one-off bases in one interval: at most MAX_SUBJECTS held, the rest told as dropped', async () => {
    const store = new MemoryUsageStore(MAX_SUBJECTS)
    const dropped: number[] = []
    const rec = new UsageRecorder(store, { ...options(), onDropped: (n) => dropped.push(n) })
    for (let i = 0; i < 200_000; i++) rec.record(uuid(i), T)
    expect(rec.size).toBe(MAX_SUBJECTS)
    await rec.flush()
    expect(dropped).toEqual([200_000 - MAX_SUBJECTS])
    expect(rec.size).toBe(0)
    expect(store.size).toBe(MAX_SUBJECTS)
  })

  it('200,000 one-off bases over a minute, flushed to Redis every 2 s: nothing dropped, and the process does not grow with them', async () => {
    const clock = new FakeClock(T)
    const store = new RedisUsageStore(db.client(), `${db.redis.prefix}rec:`)
    let dropped = 0
    const rec = new UsageRecorder(store, { ...options(clock), onDropped: (n) => (dropped += n) })
    const heapBefore = retainedMb()
    const rssBefore = rssMb()
    let peak = rssBefore
    for (let s = 0; s < 30; s++) {
      for (let i = 0; i < 200_000 / 30; i++) rec.record(uuid(s * 10_000 + i), clock.now())
      await rec.flush()
      clock.advance(2000)
      peak = Math.max(peak, rssMb())
    }
    expect(dropped).toBe(0)
    // What the process keeps after a minute of one-off bases: nothing of them (each interval's
    // counts go with its flush).
    expect(retainedMb() - heapBefore).toBeLessThan(8)
    expect(peak - rssBefore).toBeLessThan(256)
    expect(
      (await store.read(uuid(29 * 10_000), '2026-11-25', '2026-11-25')).get('2026-11-25')
    ).toBe(1)
    const nov = await allBases(store, '2026-11')
    expect(nov.length).toBe(30 * Math.ceil(200_000 / 30))
  }, 60_000)

  it('a failed write is kept for the next one; a day change starts a new day', async () => {
    let fail = true
    const inner = new MemoryUsageStore()
    const store: UsageStore = {
      add: async (b, id) => {
        if (fail) throw new Error('store down')
        return inner.add(b, id)
      },
      read: inner.read.bind(inner),
      bases: inner.bases.bind(inner),
    }
    const errors: unknown[] = []
    const rec = new UsageRecorder(store, { ...options(), onError: (e) => errors.push(e) })
    rec.record(uuid(1), Date.parse('2026-11-30T23:59:59Z'))
    expect(await rec.flush()).toBe(false)
    expect(errors).toHaveLength(1)
    fail = false
    rec.record(uuid(1), Date.parse('2026-12-01T00:00:01Z'))
    expect(await rec.flush()).toBe(true)
    const got = await inner.read(uuid(1), '2026-11-30', '2026-12-01')
    expect([...got]).toEqual([
      ['2026-11-30', 1],
      ['2026-12-01', 1],
    ])
  })

  it('issue #40 item 1: a write that timed out but landed is written again and counts once', async () => {
    const prefix = `${db.redis.prefix}twice:`
    const inner = new RedisUsageStore(db.client(), prefix)
    let lateAnswers = 2
    // The store applies each write, then (twice) the answer comes too late: a timeout.
    const late: UsageStore = {
      add: async (b, id) => {
        await inner.add(b, id)
        if (lateAnswers-- > 0) throw new Error('redis: no answer within 100 ms')
      },
      read: inner.read.bind(inner),
      bases: inner.bases.bind(inner),
    }
    const rec = new UsageRecorder(late, options())
    for (let i = 0; i < 1001; i++) rec.record(uuid(7), T)
    expect(await rec.flush()).toBe(false)
    rec.record(uuid(7), T) // gathers meanwhile, and waits its turn
    expect(await rec.flush()).toBe(false)
    expect(await rec.flush()).toBe(true)
    expect((await inner.read(uuid(7), '2026-11-25', '2026-11-25')).get('2026-11-25')).toBe(1002)
  })

  it('a write to Redis that fails part way is written again whole: what landed is skipped, nothing counted twice', async () => {
    const prefix = `${db.redis.prefix}part:`
    const client = db.client()
    const store = new RedisUsageStore(client, prefix)
    const errors: unknown[] = []
    const rec = new UsageRecorder(store, { ...options(), onError: (e) => errors.push(e) })
    // 2,500 bases: three pipelines of 1,000; one key in the second holds a string, so its
    // script fails (WRONGTYPE) while the rest of the pipelines go in.
    for (let i = 0; i < 2500; i++) rec.record(uuid(100_000 + i), T)
    const poison = `${prefix}{u:b:${uuid(101_200)}}:days:2026-11`
    await client.set(poison, 'x')
    expect(await rec.flush()).toBe(false)
    expect(errors).toHaveLength(1)
    expect(String(errors[0])).toMatch(/WRONGTYPE/)
    await client.del(poison)
    expect(await rec.flush()).toBe(true)
    expect(errors).toHaveLength(1)
    for (const i of [0, 999, 1000, 1200, 1999, 2000, 2499]) {
      const got = await store.read(uuid(100_000 + i), '2026-11-25', '2026-11-25')
      expect(got.get('2026-11-25'), `base ${i}`).toBe(1)
    }
  })

  it('days in the configured zone: 23:30 UTC is the next day in Asia/Tokyo', async () => {
    const store = new MemoryUsageStore()
    const rec = new UsageRecorder(store, { ...options(), timezone: () => 'Asia/Tokyo' })
    rec.record(uuid(2), Date.parse('2026-11-25T23:30:00Z'))
    await rec.flush()
    expect([...(await store.read(uuid(2), '2026-11-01', '2026-11-30'))]).toEqual([
      ['2026-11-26', 1],
    ])
  })

  it('reads a range across months, with days without calls as 0', () => {
    expect(monthsOf('2026-10-30', '2027-01-02')).toEqual([
      '2026-10',
      '2026-11',
      '2026-12',
      '2027-01',
    ])
    expect(dayRows(new Map([['2026-11-02', 3]]), '2026-10-31', '2026-11-02')).toEqual([
      { date: '2026-10-31', calls: 0 },
      { date: '2026-11-01', calls: 0 },
      { date: '2026-11-02', calls: 3 },
    ])
  })
})

describe('the in-memory usage store is bounded (issue #40 item 5)', () => {
  it('keeps at most its bound of bases, forgetting the one written longest ago, and counts what it forgot', async () => {
    const store = new MemoryUsageStore(1000)
    let seq = 0
    for (let round = 0; round < 5; round++) {
      const counts = new Map<string, number>()
      for (let i = 0; i < 500; i++) counts.set(uuid(round * 1000 + i), 1)
      // A steady base, written every round, is never the stalest.
      counts.set(uuid(999_999), 1)
      await store.add(new Map([['2026-11-25', { monthEndMs: 0, counts }]]), {
        instance: 'm',
        seq: ++seq,
      })
    }
    expect(store.size).toBe(1000)
    expect(store.forgotten).toBe(5 * 500 + 1 - 1000)
    expect((await store.read(uuid(999_999), '2026-11-25', '2026-11-25')).get('2026-11-25')).toBe(5)
  })
})
