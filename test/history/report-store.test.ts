import { describe, expect, it } from 'vitest'
import {
  MemoryReportStore,
  RedisReportStore,
  UpgradeRecorder,
} from '../../src/history/report-store.js'
import { useRedis } from '../helpers/redis.js'
import { useCluster } from '../helpers/redis-cluster.js'
import { batch, reportContract } from './report-contract.js'
import { FakeClock } from '../helpers/clock.js'

const db = useRedis()
let made = 0
const options = () => ({ instance: 'test', clock: new FakeClock(Date.UTC(2026, 10, 23, 12)) })

reportContract('MemoryReportStore', async () => new MemoryReportStore())
reportContract(
  'RedisReportStore',
  async () => new RedisReportStore(db.client(), `${db.redis.prefix}r${made++}:`)
)

describe('RedisReportStore on a Redis Cluster', () => {
  const { client } = useCluster()
  it('counts across instances, each entry on its own slot', async () => {
    const a = new RedisReportStore(client(), 'bgr:')
    const b = new RedisReportStore(client(), 'bgr:')
    const t = Date.now()
    await a.add(batch({ x1: { 'base:a': 2 }, x2: { 'ip:1.1.1.1': 1 } }, t), {
      instance: 'a',
      seq: 1,
    })
    await b.add(batch({ x1: { 'base:a': 1, 'base:b': 1 } }, t), { instance: 'b', seq: 1 })
    const r = await a.read(['x1', 'x2'], t)
    expect(r.get('x1')).toMatchObject({
      calls: 4,
      topKeys: [
        { key: 'base:a', calls: 3 },
        { key: 'base:b', calls: 1 },
      ],
    })
    expect(r.get('x2')!.calls).toBe(1)
  })
})

describe('UpgradeRecorder: counts in memory, writes in batches', () => {
  it('makes no store call per request, then one write per flush', async () => {
    const store = new MemoryReportStore()
    let adds = 0
    const counted = {
      add: async (...a: Parameters<MemoryReportStore['add']>) => (adds++, store.add(...a)),
      read: store.read.bind(store),
    }
    const rec = new UpgradeRecorder(counted, options())
    const t = Date.now()
    for (let i = 0; i < 1000; i++) rec.record('e', `base:${i % 7}`, t)
    expect(adds).toBe(0)
    await rec.flush()
    expect(adds).toBe(1)
    expect((await store.read(['e'], t)).get('e')!.calls).toBe(1000)
  })

  it('keeps a batch whose write failed, and writes it with the next', async () => {
    const store = new MemoryReportStore()
    let fail = true
    const flaky = {
      add: async (...a: Parameters<MemoryReportStore['add']>) => {
        if (fail) throw new Error('down')
        return store.add(...a)
      },
      read: store.read.bind(store),
    }
    const errors: unknown[] = []
    const rec = new UpgradeRecorder(flaky, { ...options(), onError: (e) => errors.push(e) })
    const t = Date.now()
    rec.record('e', 'base:a', t)
    await rec.flush()
    fail = false
    rec.record('e', 'base:a', t)
    await rec.flush()
    expect(errors).toHaveLength(1)
    expect((await store.read(['e'], t)).get('e')).toMatchObject({
      calls: 2,
      topKeys: [{ key: 'base:a', calls: 2 }],
    })
  })
})

// Issue #22: each instance kept the first 1,000 distinct keys per entry between two flushes,
// so a real client calling 1/s beside thousands of fresh UUIDs a second showed 2 or 4 of its
// 10 calls. Totals stay exact; a returning client is never pushed out by one-offs.
describe('UpgradeRecorder under a flood of one-off keys', () => {
  it('a client calling steadily keeps (nearly) all its calls in the top keys', async () => {
    const store = new MemoryReportStore()
    const rec = new UpgradeRecorder(store, options())
    const t0 = Date.UTC(2026, 10, 23, 12)
    let n = 0
    for (let second = 0; second < 10; second++) {
      rec.record('e', 'base:steady', t0 + second * 1000)
      for (let i = 0; i < 3500; i++)
        rec.record('e', `base:oneoff${n++}`, t0 + second * 1000 + i / 4)
      if (second % 2 === 1) await rec.flush()
    }
    await rec.flush()
    const usage = (await store.read(['e'], t0 + 10_000)).get('e')!
    expect(usage.calls).toBe(10 + 35_000) // exact
    const steady = usage.topKeys.find((k) => k.key === 'base:steady')
    expect(steady?.calls).toBeGreaterThanOrEqual(9) // its first call may find the batch full
    expect(usage.topKeys[0]!.key).toBe('base:steady')
  })
})
