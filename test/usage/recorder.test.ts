import v8 from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { MAX_SUBJECTS, UsageRecorder } from '../../src/usage/recorder.js'
import { MemoryUsageStore, RedisUsageStore, dayRows, monthsOf } from '../../src/usage/store.js'
import { FakeClock } from '../helpers/clock.js'
import { useRedis } from '../helpers/redis.js'

// Issue #33: the per-process day counts, bounded in memory whatever the number of bases, and
// written to a real redis-server as one pipeline a flush.

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

describe('the day counts in this process (issue #33)', () => {
  it('200,000 one-off bases in one interval: at most MAX_SUBJECTS held, the rest told as dropped, teams always counted', async () => {
    const store = new MemoryUsageStore()
    const dropped: number[] = []
    const rec = new UsageRecorder(store, {
      timezone: () => 'UTC',
      onDropped: (n) => dropped.push(n),
    })
    for (let i = 0; i < 200_000; i++) rec.record(uuid(i), i % 1000 === 0 ? 'acme' : undefined, T)
    expect(rec.size).toBe(MAX_SUBJECTS) // the team, and the bases up to the bound
    await rec.flush()
    expect(dropped).toEqual([200_000 - (MAX_SUBJECTS - 1)])
    expect(rec.size).toBe(0)
    const team = await store.read('t:acme', '2026-11-25', '2026-11-25')
    expect(team.get('2026-11-25')).toBe(200)
  })

  it('200,000 one-off bases over a minute, flushed to Redis every 2 s: nothing dropped, and the process does not grow with them', async () => {
    const clock = new FakeClock(T)
    const store = new RedisUsageStore(db.client(), `${db.redis.prefix}rec:`)
    let dropped = 0
    const rec = new UsageRecorder(store, {
      timezone: () => 'UTC',
      clock,
      onDropped: (n) => (dropped += n),
    })
    const heapBefore = retainedMb()
    const rssBefore = rssMb()
    let peak = rssBefore
    for (let s = 0; s < 30; s++) {
      for (let i = 0; i < 200_000 / 30; i++) rec.record(uuid(s * 10_000 + i), 'acme', clock.now())
      await rec.flush()
      clock.advance(2000)
      peak = Math.max(peak, rssMb())
    }
    expect(dropped).toBe(0)
    // What the process keeps after a minute of one-off bases: nothing of them (each interval's
    // counts go with its flush). Measured: under 1 MB retained; the RSS peak (the test's own
    // UUID strings and ioredis's pipeline buffers, garbage until collected) 100-170 MB.
    expect(retainedMb() - heapBefore).toBeLessThan(8)
    expect(peak - rssBefore).toBeLessThan(256)
    const team = await store.read('t:acme', '2026-11-25', '2026-11-25')
    expect(team.get('2026-11-25')).toBe(30 * Math.ceil(200_000 / 30))
  }, 60_000)

  it('a failed write is kept for the next one; a day change starts a new day', async () => {
    let fail = true
    const inner = new MemoryUsageStore()
    const store = {
      add: async (b: Parameters<MemoryUsageStore['add']>[0]) => {
        if (fail) throw new Error('store down')
        return inner.add(b)
      },
      read: inner.read.bind(inner),
      claimNotice: inner.claimNotice.bind(inner),
    }
    const errors: unknown[] = []
    const rec = new UsageRecorder(store, { timezone: () => 'UTC', onError: (e) => errors.push(e) })
    rec.record(uuid(1), undefined, Date.parse('2026-11-30T23:59:59Z'))
    await rec.flush()
    expect(errors).toHaveLength(1)
    fail = false
    rec.record(uuid(1), undefined, Date.parse('2026-12-01T00:00:01Z'))
    await rec.flush()
    const got = await inner.read(`b:${uuid(1)}`, '2026-11-30', '2026-12-01')
    expect([...got]).toEqual([
      ['2026-11-30', 1],
      ['2026-12-01', 1],
    ])
  })

  it('a write to Redis that fails part way keeps only what was not written: nothing counted twice', async () => {
    const prefix = `${db.redis.prefix}part:`
    const client = db.client()
    const store = new RedisUsageStore(client, prefix)
    const errors: unknown[] = []
    const rec = new UsageRecorder(store, { timezone: () => 'UTC', onError: (e) => errors.push(e) })
    // 2,500 bases: three pipelines of 1,000; one key in the second holds a string, so its
    // HINCRBY fails (WRONGTYPE) while the rest of the pipelines go in.
    for (let i = 0; i < 2500; i++) rec.record(uuid(100_000 + i), undefined, T)
    const poison = `${prefix}{u:b:${uuid(101_200)}}:days:2026-11`
    await client.set(poison, 'x')
    await rec.flush()
    expect(errors).toHaveLength(1)
    expect(String(errors[0])).toMatch(/WRONGTYPE/)
    // Kept: the failed key, and the third pipeline (not sent after the second failed).
    expect(rec.size).toBe(1 + 500)
    await client.del(poison)
    await rec.flush()
    expect(errors).toHaveLength(1)
    for (const i of [0, 999, 1000, 1200, 1999, 2000, 2499]) {
      const got = await store.read(`b:${uuid(100_000 + i)}`, '2026-11-25', '2026-11-25')
      expect(got.get('2026-11-25'), `base ${i}`).toBe(1)
    }
  })

  it('days in the configured zone: 23:30 UTC is the next day in Asia/Tokyo', async () => {
    const store = new MemoryUsageStore()
    const rec = new UsageRecorder(store, { timezone: () => 'Asia/Tokyo' })
    rec.record(uuid(2), undefined, Date.parse('2026-11-25T23:30:00Z'))
    await rec.flush()
    expect([...(await store.read(`b:${uuid(2)}`, '2026-11-01', '2026-11-30'))]).toEqual([
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
