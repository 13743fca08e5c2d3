import { describe, expect, it } from 'vitest'
import calculateSlot from 'cluster-key-slot'
import { RedisStore } from '../../src/limiter/redis-store.js'
import { CallerClockRedisStore } from '../helpers/caller-clock.js'
import { FakeClock } from '../helpers/clock.js'
import { useCluster } from '../helpers/redis-cluster.js'
import { calendarContract, charge, ledgerContract, storeContract } from './store-contract.js'
import { systemClock } from '../../src/clock.js'

const shared = useCluster()
const client = () => shared.client()
let made = 0

// The contract drives time by hand: the caller's clock. Production's store clock is tested below.
const store = () =>
  new CallerClockRedisStore(client(), {
    clock: systemClock,
    prefix: `bgc${made++}:`,
    cluster: true,
  })

storeContract('RedisStore on a Redis Cluster', { make: async () => store() })
calendarContract('RedisStore on a Redis Cluster', { make: async () => store() })
ledgerContract('RedisStore on a Redis Cluster', { make: async () => store() })

describe('Redis Cluster: windows across slots', () => {
  it('a request whose windows span two slots is all or nothing (the earlier slot is refunded)', async () => {
    const s = store()
    const base = { ...charge(10), key: '{b:aaa}:base:60000' }
    const ceiling = { ...charge(2), key: '{ip:1.2.3.4}:ceiling:60000', kind: 'ip_ceiling' as const }
    expect(calculateSlot(`x${base.key}`)).not.toBe(calculateSlot(`x${ceiling.key}`))
    const now = Date.now()
    expect((await s.consume([base, ceiling], now)).allowed).toBe(true)
    expect((await s.consume([base, ceiling], now)).allowed).toBe(true)
    const refused = await s.consume([base, ceiling], now)
    expect(refused.allowed).toBe(false)
    expect(refused.windows[1]!.retryAtMs).toBeGreaterThan(0)
    // The base window was charged then refunded: still two calls counted.
    const peek = await s.peek([base, ceiling], now)
    expect(peek.windows.map((w) => w.used)).toEqual([2, 2])
  })

  it('a team base: rate windows in the base slot (whatever its team), the month with its override, all or nothing', async () => {
    const { compileClassifier } = await import('../../src/http/classify.js')
    const { parseConfig } = await import('../../src/config/load.js')
    const { effectiveTeams, teamsByBase } = await import('../../src/quota/teams.js')
    const r = parseConfig(
      'rate_limits: { rules: [ { name: r1, path: "/api-gateway/*", limits: 5/s } ] }\nmonthly: { enabled: true, plans: { tiny: { calls: 2 } }, teams: [ { id: acme, plan: tiny, bases: [6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10] } ] }',
      {}
    )
    if (!r.ok) throw new Error('bad')
    const cls = compileClassifier(r.config, teamsByBase(effectiveTeams(r.config, new Map())))
    const path = '/api-gateway/api/v2/dtables/6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10/rows/'
    const c = cls.classify('GET', path, '1.1.1.1', Date.now())
    const slot = (k: string) => calculateSlot(`basegate:${k}`)
    const month = c.charges.find((x) => x.kind === 'monthly')
    if (month?.kind !== 'monthly') throw new Error('no monthly charge')
    const rate = c.charges.filter((x) => x.kind !== 'monthly')
    expect(rate.length).toBe(2)
    for (const x of rate) expect(slot(x.key)).toBe(slot('{b:6f1c2a4e0d3b4c599a513e2d7c8b9a10}'))
    expect(slot(month.key)).toBe(slot(month.quotaKey))
    // The month refuses the third call: the base slot's charge is refunded.
    const s = new RedisStore(client(), { clock: systemClock, prefix: 'basegate:', cluster: true })
    expect((await s.consume(c.charges, Date.now())).allowed).toBe(true)
    expect((await s.consume(c.charges, Date.now())).allowed).toBe(true)
    expect((await s.consume(c.charges, Date.now())).allowed).toBe(false)
    const peek = await s.peek(c.charges, Date.now())
    expect(peek.windows.map((w) => w.used)).toEqual([2, 2, 2])
  })

  it('survives a node restart: the client follows MOVED/reconnects and counting resumes', async () => {
    const s = store()
    const c = charge(1000)
    expect((await s.consume([c], Date.now())).allowed).toBe(true)
    const slot = calculateSlot(`bgc${made - 1}:${c.key}`)
    const owner = await findOwner(slot)
    await shared.cluster.kill(owner)
    await expect(s.consume([c], Date.now())).rejects.toThrow()
    await shared.cluster.restart(owner)
    const deadline = Date.now() + 15_000
    let ok = false
    while (!ok && Date.now() < deadline) {
      ok = await s.consume([c], Date.now()).then(
        (d) => d.allowed,
        () => false
      )
      if (!ok) await new Promise((r) => setTimeout(r, 200))
    }
    expect(ok).toBe(true)
  }, 60_000)
})

async function findOwner(slot: number): Promise<number> {
  const c = client()
  const slots = (await c.cluster('SLOTS')) as unknown as [number, number, [string, number]][]
  for (const [from, to, [, port]] of slots)
    if (slot >= from && slot <= to) return shared.cluster.ports.indexOf(port)
  throw new Error('no owner')
}

describe('Redis Cluster: leases (issue #14)', () => {
  it('a hot key admits from its share, gives the rest back in its own slot, and a request across slots takes none', async () => {
    const { LeasingStore } = await import('../../src/limiter/leases.js')
    const prefix = `bgc${made++}:`
    const s = new CallerClockRedisStore(client(), { clock: systemClock, prefix, cluster: true })
    const reader = new CallerClockRedisStore(client(), {
      clock: systemClock,
      prefix,
      cluster: true,
    })
    let calls = 0
    const counted = new Proxy(s, {
      get: (t, p) =>
        p === 'consume'
          ? (...a: Parameters<RedisStore['consume']>) => (calls++, t.consume(...a))
          : Reflect.get(t, p),
    })
    const leasing = new LeasingStore(counted, { clock: new FakeClock(Date.now()) })
    const base = { ...charge(1000), key: '{b:hot}:base:60000' }
    const other = { ...charge(1000), key: '{b:other}:base:60000' }
    expect(calculateSlot(`${prefix}${base.key}`)).not.toBe(calculateSlot(`${prefix}${other.key}`))
    const t = Math.floor(Date.now() / 1200) * 1200 + 100
    for (const c of [base, other])
      for (let i = 0; i < 20; i++) expect((await leasing.consume([c], t + i)).allowed).toBe(true)
    expect(calls).toBeLessThan(20)
    expect(leasing.held).toBe(2)
    // Both shares go back in one batch, sent slot by slot.
    await leasing.close()
    const after = await reader.peek([base, other], t + 30)
    expect(after.windows.map((w) => w.used)).toEqual([20, 20])
    // Two slots: every call goes to the store, and nothing is held.
    const ceiling = {
      ...charge(1000),
      key: '{ip:9.9.9.9}:ceiling:60000',
      kind: 'ip_ceiling' as const,
    }
    const both = new LeasingStore(store(), { clock: new FakeClock(Date.now()) })
    for (let i = 0; i < 10; i++)
      await both.consume([{ ...base, key: '{b:two}:base:60000' }, ceiling], t + i)
    expect(both.held).toBe(0)
  })
})

describe('Redis Cluster: tuning evidence (SPEC §11)', () => {
  it('key-days spread over slots are written once per batch and read back, the index across shards', async () => {
    const { RedisShapeStore } = await import('../../src/tuning/shape-store.js')
    const shapes = new RedisShapeStore(client(), `bgc${made++}:`)
    const family = 'GET /api-gateway/api/v2/dtables/<u>/rows/'
    const series = new Map(
      Array.from({ length: 40 }, (_, i) => [
        `base:${String(i).padStart(32, '0')}\t${family}`,
        {
          total: i + 1,
          refusedRate: 0,
          refusedMonthly: 0,
          hours: new Map([[10, new Map([[i, i + 1]])]]),
        },
      ])
    )
    const batch = new Map([
      ['2026-11-20', { dayEndMs: Date.parse('2026-11-21T00:00:00Z'), series }],
    ])
    await shapes.add(batch, { instance: 'c', seq: 1 })
    await shapes.add(batch, { instance: 'c', seq: 1 }) // in doubt, written again: once
    const slots = new Set([...series.keys()].map((s) => calculateSlot(`{sh:${s.split('\t')[0]}}`)))
    expect(slots.size).toBeGreaterThan(10)
    const { series: ids } = await shapes.seriesOf('2026-11-20', 1000)
    expect(ids.sort()).toEqual([...series.keys()].sort())
    const back = await shapes.read('2026-11-20', [...series.keys()])
    for (const [sid, s] of series) {
      const d = back.get(sid)!
      expect(d.total).toBe(s.total)
      expect([...d.hours.get(10)!.counts].reduce((a, b) => a + b, 0)).toBe(s.total)
    }
  })
})
