import { describe, expect, it } from 'vitest'
import { LeasingStore } from '../../src/limiter/leases.js'
import { RedisStore } from '../../src/limiter/redis-store.js'
import { CallerClockRedisStore } from '../helpers/caller-clock.js'
import { FakeClock } from '../helpers/clock.js'
import type { Charge, ConsumeOptions, Decision, GiveBack, LimiterStore } from '../../src/types.js'
import { useRedis } from '../helpers/redis.js'
import { charge, expectBoundHeld, seededRandom, storeContract } from './store-contract.js'
import { systemClock } from '../../src/clock.js'
import { holds } from '../helpers/until.js'

const db = useRedis()
let made = 0

/** Counts the calls that reach the Redis store (a round trip each). */
class Counted implements LimiterStore {
  consumes = 0
  givenBack = 0
  giveBackCalls = 0
  constructor(readonly inner: RedisStore) {}
  consume(charges: readonly Charge[], nowMs: number, opts?: ConsumeOptions): Promise<Decision> {
    this.consumes++
    return this.inner.consume(charges, nowMs, opts)
  }
  giveBack(uses: readonly GiveBack[]): Promise<void> {
    this.giveBackCalls++
    this.givenBack += uses.reduce((a, u) => a + u.units, 0)
    return this.inner.giveBack(uses)
  }
  peek(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    return this.inner.peek(charges, nowMs)
  }
  credit: LimiterStore['credit'] = (ref, c) => this.inner.credit(ref, c)
  readLedger: LimiterStore['readLedger'] = (ref) => this.inner.readLedger(ref)
  addToLedger: LimiterStore['addToLedger'] = (b, id) => this.inner.addToLedger(b, id)
  claimNotice: LimiterStore['claimNotice'] = (ref, t, token) =>
    this.inner.claimNotice(ref, t, token)
  ready(): Promise<boolean> {
    return this.inner.ready()
  }
  close(): Promise<void> {
    return this.inner.close()
  }
}

/**
 * Leasing instances over one Redis, each with its own connection, as separate gateways. The
 * leases run their production path (a timer ends each share) on a clock the test moves: `at(t)`
 * moves it to t, running the timers that fall due, and the store buckets calls at that time.
 */
function instances(count: number) {
  const prefix = `${db.redis.prefix}lease${made++}:`
  const clock = new FakeClock(T0)
  const backs = Array.from(
    { length: count },
    () =>
      new Counted(
        new CallerClockRedisStore(db.client({ enableAutoPipelining: true }), { prefix, clock })
      )
  )
  const stores = backs.map((b) => new LeasingStore(b, { clock }))
  /** Moves the clock to t (never back) and returns t, for the call's nowMs. */
  const at = (t: number) => {
    if (t > clock.now()) clock.set(t)
    return clock.now()
  }
  /** Every give-back sent or waiting has been answered. */
  const settled = () => Promise.all(stores.map((s) => s.settled()))
  return { prefix, backs, stores, admin: db.client(), clock, at, settled }
}

/** The window's hash: its running total, and the sum of its bucket fields. */
async function counted(admin: ReturnType<typeof db.client>, key: string) {
  const h = await admin.hgetall(key)
  let sum = 0
  for (const [f, v] of Object.entries(h)) if (/^\d+$/.test(f)) sum += Number(v)
  return { total: Number(h.t ?? 0), sum }
}

const BUCKET = 60_000 / 50
/** The middle of a bucket, so a few ms of driven time stay in it. */
const T0 = Math.floor(Date.now() / BUCKET) * BUCKET + 100

// The whole contract, with leases on, on one instance.
storeContract('LeasingStore over Redis', { make: async () => instances(1).stores[0]! })

describe('leases for hot keys (issue #14)', () => {
  it('admits a hot key from its share without store calls, counting remaining down by one', async () => {
    const { backs, stores, at } = instances(1)
    const c = charge(1000)
    const remaining: number[] = []
    for (let i = 0; i < 40; i++) {
      const d = await stores[0]!.consume([c], at(T0 + i))
      expect(d.allowed).toBe(true)
      remaining.push(d.windows[0]!.remaining)
    }
    expect(remaining).toEqual(Array.from({ length: 40 }, (_, i) => 999 - i))
    // 40 calls in one bucket took far fewer round trips (asks grow with what the key sees).
    expect(backs[0]!.consumes).toBeLessThanOrEqual(8)
  })

  it('takes no lease while the window is past half its limit', async () => {
    const { backs, stores, prefix, admin, at } = instances(1)
    const c = charge(100)
    // 50 calls spread over earlier buckets: the window is at half.
    const base = new CallerClockRedisStore(db.client(), { clock: systemClock, prefix })
    for (let i = 0; i < 50; i++) await base.consume([c], T0 - 30_000 + i * 100)
    const before = backs[0]!.consumes
    for (let i = 0; i < 20; i++)
      expect((await stores[0]!.consume([c], at(T0 + i))).allowed).toBe(true)
    // Every call went to the store, each charging itself alone.
    expect(backs[0]!.consumes - before).toBe(20)
    expect(await counted(admin, prefix + c.key)).toEqual({ total: 70, sum: 70 })
  })

  it('gives an unused share back when its bucket ends', async () => {
    const { backs, stores, prefix, admin, at, settled } = instances(1)
    const c = charge(1000)
    for (let i = 0; i < 6; i++) await stores[0]!.consume([c], at(T0 + i))
    // The share outlives these calls: the store counts more than were admitted.
    const held = await counted(admin, prefix + c.key)
    expect(held.total).toBeGreaterThan(6)
    expect(held.total).toBe(held.sum)
    // The next call falls in a later bucket: the unused share goes back first (the call may
    // take a share of its own, which the decision says).
    const next = await stores[0]!.consume([c], at(T0 + BUCKET))
    await settled()
    const charged = next.windows[0]!.charged ?? 1
    expect(await counted(admin, prefix + c.key)).toEqual({ total: 6 + charged, sum: 6 + charged })
    expect(backs[0]!.givenBack).toBe(held.total - 6)
  })

  it('on the store clock, a share ends with its bucket and goes back by itself', async () => {
    // Production as it runs: the store's TIME, the system clock, real timers.
    const prefix = `${db.redis.prefix}lease${made++}:`
    const stores = [
      new LeasingStore(new RedisStore(db.client(), { clock: systemClock, prefix }), {
        clock: systemClock,
      }),
    ]
    const admin = db.client()
    // A 1 s window: 20 ms buckets.
    const c = charge(10_000, 1000)
    let admitted = 0
    for (let i = 0; i < 30; i++) if ((await stores[0]!.consume([c], Date.now())).allowed) admitted++
    expect(admitted).toBe(30)
    // The lease ends with its bucket (20 ms): the unused share goes back. Its give-back is
    // batched a few ms and then answered: the lease is gone before the store has it back.
    await holds(() => stores[0]!.held === 0)
    await stores[0]!.settled()
    expect(await counted(admin, prefix + c.key)).toEqual({ total: 30, sum: 30 })
  })

  it('gives the shares of many keys back in one store call', async () => {
    const { backs, stores, prefix, admin, at } = instances(1)
    const cs = [charge(1000), charge(1000), charge(1000)]
    for (const c of cs) for (let i = 0; i < 6; i++) await stores[0]!.consume([c], at(T0 + i))
    expect(stores[0]!.held).toBe(3)
    // Each goes back to the bucket it was charged in, all three in one script call.
    await stores[0]!.close()
    expect(backs[0]!.giveBackCalls).toBe(1)
    for (const c of cs) expect(await counted(admin, prefix + c.key)).toEqual({ total: 6, sum: 6 })
  })

  it('gives every share back on close', async () => {
    const { stores, prefix, admin, at } = instances(1)
    const c = charge(1000)
    for (let i = 0; i < 6; i++) await stores[0]!.consume([c], at(T0 + i))
    expect(stores[0]!.held).toBe(1)
    await stores[0]!.close()
    expect(await counted(admin, prefix + c.key)).toEqual({ total: 6, sum: 6 })
  })

  it('takes no lease on a limit too small to share (1/20 of it under two calls)', async () => {
    const { backs, stores, at } = instances(1)
    const c = charge(39)
    for (let i = 0; i < 10; i++) await stores[0]!.consume([c], at(T0 + i))
    expect(backs[0]!.consumes).toBe(10)
    const d = charge(40)
    for (let i = 0; i < 10; i++) await stores[0]!.consume([d], at(T0 + i))
    expect(backs[0]!.consumes).toBeLessThan(20)
  })

  it('takes no lease for a request with a monthly window', async () => {
    const { backs, stores, at } = instances(1)
    const month: Charge = {
      key: `{mt${made}}:month`,
      limit: 1000,
      endMs: T0 + 86_400_000,
      kind: 'monthly',
      cls: 'base',
      team: 't',
      quotaKey: `{mt${made}}:team`,
      day: '15',
      month: '2026-11',
    }
    const c = charge(1000)
    for (let i = 0; i < 10; i++) await stores[0]!.consume([c, month], at(T0 + i))
    expect(backs[0]!.consumes).toBe(10)
  })

  it('does not admit from a share granted under a limit a reload has changed', async () => {
    const { backs, stores, at } = instances(1)
    const c = charge(1000)
    for (let i = 0; i < 6; i++) await stores[0]!.consume([c], at(T0 + i))
    expect(stores[0]!.held).toBe(1)
    const before = backs[0]!.consumes
    const lowered = { ...c, limit: 500 }
    await stores[0]!.consume([lowered], at(T0 + 10))
    expect(backs[0]!.consumes).toBe(before + 1)
  })

  describe('three instances on one Redis, leases on', () => {
    it('never admits more than the limit in any window, across random arrivals', async () => {
      const { stores, at } = instances(3)
      const limit = 40
      const c = charge(limit, 10_000)
      const admitted: number[] = []
      let t = T0
      const rand = seededRandom(7)
      for (let round = 0; round < 300; round++) {
        t += Math.floor(rand() * 120)
        // A few calls at once on different instances, as concurrent clients would send.
        const now = at(t)
        const ds = await Promise.all(
          [0, 1, 2].map(() => stores[Math.floor(rand() * 3)]!.consume([c], now))
        )
        ds.forEach((d) => d.allowed && admitted.push(now))
      }
      expectBoundHeld(admitted, 10_000, limit)
      expect(admitted.length).toBeGreaterThan(limit)
    })

    it('admits no more than the limit from a concurrent burst, and leaves no share unused', async () => {
      const { stores, backs, prefix, admin, at } = instances(3)
      const c = charge(100)
      const ds = await Promise.all(
        Array.from({ length: 450 }, (_, i) => stores[i % 3]!.consume([c], at(T0)))
      )
      // Exactly the limit: no share sat unused while its own instance refused a call (a
      // refusal is answered from the instance's share when it holds one).
      expect(ds.filter((d) => d.allowed).length).toBe(100)
      const admitted = ds.filter((d) => d.allowed && d.leased).length
      expect(admitted).toBeGreaterThan(0)
      expect(backs.reduce((a, b) => a + b.consumes, 0)).toBeLessThan(450)
      expect((await counted(admin, prefix + c.key)).total).toBe(100)
      await Promise.all(stores.map((s) => s.close()))
      expect((await counted(admin, prefix + c.key)).total).toBe(100)
    })

    it('never refuses clients sending steadily at 90 % of the limit, spread over the instances', async () => {
      const { stores, at } = instances(3)
      const limit = 300
      const c = charge(limit)
      const interval = 60_000 / (limit * 0.9)
      let refused = 0
      for (let i = 0; i < 900; i++) {
        const d = await stores[i % 3]!.consume([c], at(T0 + Math.round(i * interval)))
        if (!d.allowed) refused++
      }
      expect(refused).toBe(0)
    })

    it('does not count refused calls', async () => {
      const { stores, prefix, admin, at } = instances(3)
      const c = charge(60)
      let admitted = 0
      for (let i = 0; i < 200; i++) {
        if ((await stores[i % 3]!.consume([c], at(T0 + Math.floor(i / 4)))).allowed) admitted++
      }
      await Promise.all(stores.map((s) => s.close()))
      expect(admitted).toBe(60)
      expect(await counted(admin, prefix + c.key)).toEqual({ total: 60, sum: 60 })
    })
  })
})
