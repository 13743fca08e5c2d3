import { describe, expect, it } from 'vitest'
import {
  MemoryReportStore,
  RedisReportStore,
  UpgradeRecorder,
} from '../../src/history/report-store.js'
import { useRedis } from '../helpers/redis.js'
import { useCluster } from '../helpers/redis-cluster.js'
import { batch, reportContract } from './report-contract.js'

const db = useRedis()
let made = 0

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
    await a.add(batch({ x1: { 'base:a': 2 }, x2: { 'ip:1.1.1.1': 1 } }, t), t)
    await b.add(batch({ x1: { 'base:a': 1, 'base:b': 1 } }, t), t)
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
    const rec = new UpgradeRecorder(counted)
    const t = Date.now()
    for (let i = 0; i < 1000; i++) rec.record('e', `base:${i % 7}`, t)
    expect(adds).toBe(0)
    await rec.flush(t)
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
    const rec = new UpgradeRecorder(flaky, (e) => errors.push(e))
    const t = Date.now()
    rec.record('e', 'base:a', t)
    await rec.flush(t)
    fail = false
    rec.record('e', 'base:a', t)
    await rec.flush(t)
    expect(errors).toHaveLength(1)
    expect((await store.read(['e'], t)).get('e')).toMatchObject({
      calls: 2,
      topKeys: [{ key: 'base:a', calls: 2 }],
    })
  })
})
