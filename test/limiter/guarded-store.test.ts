import { Redis } from 'ioredis'
import { storeOf } from '../helpers/stores.js'
import { describe, expect, it } from 'vitest'
import { GuardedStore } from '../../src/limiter/guarded-store.js'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { RedisStore } from '../../src/limiter/redis-store.js'
import { CallerClockRedisStore } from '../helpers/caller-clock.js'
import { StoreError } from '../../src/limiter/store-error.js'
import { evalCalls, startRedis, useRedis } from '../helpers/redis.js'
import { charge } from './store-contract.js'
import type { Decision, LimiterStore } from '../../src/types.js'
import { systemClock } from '../../src/clock.js'

const db = useRedis()
const client = () => db.client()

describe('over-limit cache', () => {
  it('answers a flood on a full window from memory until its retryAt, then asks the store again', async () => {
    const prefix = `${db.redis.prefix}shield:`
    const store = new GuardedStore(
      new CallerClockRedisStore(client(), { clock: systemClock, prefix }),
      { clock: systemClock, onError: 'open', fallback: new MemoryStore() }
    )
    const c = charge(3)
    const t0 = Date.now()
    for (let i = 0; i < 3; i++) expect((await store.consume([c], t0)).allowed).toBe(true)
    const first = await store.consume([c], t0 + 1) // the store refuses and the cache learns
    expect(first.allowed).toBe(false)
    const admin = client()
    const before = await evalCalls(admin)
    for (let i = 0; i < 500; i++) {
      const d = await store.consume([c], t0 + 2 + i)
      expect(d.allowed).toBe(false)
      expect(d.windows[0]!.retryAtMs).toBe(first.windows[0]!.retryAtMs)
    }
    if (!process.env.REDIS_URL) expect(await evalCalls(admin)).toBe(before)
    expect(store.cachedRefusals).toBe(500)
    // At retryAt the store is asked again, and admits.
    expect((await store.consume([c], first.windows[0]!.retryAtMs)).allowed).toBe(true)
  })

  it('a known-full window is refused at once, not in a promise, with no store call; anything else asks the store (issue #26)', async () => {
    const prefix = `${db.redis.prefix}now:`
    const store = new GuardedStore(
      new CallerClockRedisStore(client(), { clock: systemClock, prefix }),
      { clock: systemClock, onError: 'open', fallback: new MemoryStore() }
    )
    const c = charge(2)
    const t0 = Date.now()
    // Nothing known yet: the store must be asked.
    for (let i = 0; i < 2; i++) {
      const asked = store.consume([c], t0)
      expect(asked).toBeInstanceOf(Promise)
      expect((await asked).allowed).toBe(true)
    }
    const refusing = store.consume([c], t0 + 1)
    expect(refusing).toBeInstanceOf(Promise)
    const refused = await refusing
    expect(refused.allowed).toBe(false)
    const admin = client()
    const before = await evalCalls(admin)
    const now = store.consume([c], t0 + 2)
    expect(now).not.toBeInstanceOf(Promise)
    expect((now as Decision).allowed).toBe(false)
    expect((now as Decision).windows[0]!.retryAtMs).toBe(refused.windows[0]!.retryAtMs)
    if (!process.env.REDIS_URL) expect(await evalCalls(admin)).toBe(before)
    // Past its retry time the window is the store's again.
    const later = store.consume([c], refused.windows[0]!.retryAtMs)
    expect(later).toBeInstanceOf(Promise)
    await later
    // A window of another key is not answered from another key's entry.
    const other = store.consume([charge(2, 60_000, 'other')], t0 + 2)
    expect(other).toBeInstanceOf(Promise)
    await other
  })

  it('refuses exactly what the store would: call for call against an uncached mirror, with a second instance adding calls', async () => {
    const prefix = `${db.redis.prefix}mirror:`
    const a = new GuardedStore(
      new CallerClockRedisStore(client(), { clock: systemClock, prefix }),
      { clock: systemClock, onError: 'open', fallback: new MemoryStore() }
    )
    const b = new CallerClockRedisStore(client(), { clock: systemClock, prefix })
    const mirror = new MemoryStore()
    const c = charge(5, 10_000)
    let seed = 7
    const rand = () => (seed = (seed * 48271) % 2147483647) / 2147483647
    let t = Date.now()
    for (let i = 0; i < 1500; i++) {
      t += Math.floor(rand() * 60)
      const useB = rand() < 0.3
      const got = useB ? await b.consume([c], t) : await a.consume([c], t)
      const want = await mirror.consume([c], t)
      expect(got.allowed).toBe(want.allowed)
    }
    expect(a.cachedRefusals).toBeGreaterThan(0)
  })

  it('ignores an entry once the limit changed (a reload)', async () => {
    const store = new GuardedStore(new MemoryStore(), {
      clock: systemClock,
      onError: 'open',
      fallback: new MemoryStore(),
    })
    const c = charge(1)
    const t0 = Date.now()
    await store.consume([c], t0)
    expect((await store.consume([c], t0)).allowed).toBe(false)
    expect((await store.consume([{ ...c, limit: 5 }], t0)).allowed).toBe(true)
  })
})

describe('store.on_error', () => {
  const deadClient = () => {
    const d = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      commandTimeout: 50,
    })
    d.on('error', () => {})
    db.track(d)
    return d
  }

  it('open: limits alone in memory while the store fails, and says so once', async () => {
    const outages: boolean[] = []
    const store = new GuardedStore(
      new RedisStore(deadClient(), { clock: systemClock, prefix: 'x:' }),
      {
        clock: systemClock,
        onError: 'open',
        fallback: new MemoryStore(),
        onOutage: (down) => outages.push(down),
      }
    )
    const c = charge(2)
    const t0 = Date.now()
    const results = []
    for (let i = 0; i < 5; i++) results.push((await store.consume([c], t0)).allowed)
    expect(results).toEqual([true, true, false, false, false])
    expect(outages).toEqual([true])
  })

  it('closed: the StoreError reaches the gateway (which answers 503)', async () => {
    const store = new GuardedStore(
      new RedisStore(deadClient(), { clock: systemClock, prefix: 'x:' }),
      { clock: systemClock, onError: 'closed', fallback: new MemoryStore() }
    )
    await expect(store.consume([charge(2)], Date.now())).rejects.toBeInstanceOf(StoreError)
  })

  it('open: shared counting resumes when the store answers again', async () => {
    const own = await startRedis({ own: true })
    try {
      const c1 = new Redis(own.url, {
        commandTimeout: 100,
        maxRetriesPerRequest: 0,
        retryStrategy: () => 50,
      })
      c1.on('error', () => {})
      db.track(c1)
      const outages: boolean[] = []
      const store = new GuardedStore(new RedisStore(c1, { clock: systemClock, prefix: 'r:' }), {
        clock: systemClock,
        onError: 'open',
        fallback: new MemoryStore(),
        failuresToTrip: 1,
        probeEveryMs: 50,
        onOutage: (d) => outages.push(d),
      })
      const c = charge(100)
      expect((await store.consume([c], Date.now())).allowed).toBe(true)
      await own.kill()
      expect((await store.consume([c], Date.now())).allowed).toBe(true) // from memory
      await own.restart()
      const deadline = Date.now() + 5000
      while (outages.length < 2 && Date.now() < deadline) {
        await store.consume([c], Date.now())
        await new Promise((r) => setTimeout(r, 50))
      }
      expect(outages).toEqual([true, false])
      const check = new Redis(own.url)
      db.track(check)
      expect(await check.exists(`r:${c.key}`)).toBe(1)
    } finally {
      await own.stop()
    }
  })
})

describe('circuit breaker (issue #11: load alone must not flip an instance into fallback)', () => {
  /** An inner store whose calls fail while `failing` is set, counting the calls it gets. */
  function flaky() {
    const mem = new MemoryStore()
    const s: LimiterStore & { failing: boolean; calls: number } = Object.assign(
      storeOf(
        {
          async consume(ch, now) {
            s.calls++
            if (s.failing) throw new StoreError('slow')
            return mem.consume(ch, now)
          },
          ready: async () => !s.failing,
          close: async () => {},
        },
        mem
      ),
      { failing: false, calls: 0 }
    )
    return s
  }

  it('one slow call is answered alone; only consecutive failures mark the store down', async () => {
    const inner = flaky()
    const outages: boolean[] = []
    const g = new GuardedStore(inner, {
      clock: systemClock,
      onError: 'open',
      fallback: new MemoryStore(),
      onOutage: (d) => outages.push(d),
    })
    const c = charge(100)
    inner.failing = true
    await g.consume([c], Date.now())
    inner.failing = false
    await g.consume([c], Date.now())
    expect(g.isDown).toBe(false)
    inner.failing = true
    for (let i = 0; i < 3; i++) await g.consume([c], Date.now())
    expect(g.isDown).toBe(true)
    expect(outages).toEqual([true])
  })

  it('while down, calls do not wait on the store: one probe per interval', async () => {
    const inner = flaky()
    const g = new GuardedStore(inner, {
      clock: systemClock,
      onError: 'open',
      fallback: new MemoryStore(),
      failuresToTrip: 1,
      probeEveryMs: 60_000,
    })
    inner.failing = true
    await g.consume([charge(100)], Date.now())
    const before = inner.calls
    for (let i = 0; i < 50; i++)
      expect((await g.consume([charge(100)], Date.now())).allowed).toBe(true)
    expect(inner.calls).toBe(before)
  })

  it('closed: a call the breaker skips is a StoreError (503), not a wait', async () => {
    const inner = flaky()
    const g = new GuardedStore(inner, {
      clock: systemClock,
      onError: 'closed',
      fallback: new MemoryStore(),
      failuresToTrip: 1,
      probeEveryMs: 60_000,
    })
    inner.failing = true
    await expect(g.consume([charge(1)], Date.now())).rejects.toBeInstanceOf(StoreError)
    await expect(g.consume([charge(1)], Date.now())).rejects.toBeInstanceOf(StoreError)
    expect(inner.calls).toBe(1)
  })
})

describe('a team’s month while the store does not answer (issue #40 item 2)', () => {
  const month = (team: string, limit: number) => ({
    kind: 'monthly' as const,
    key: `{t:${team}}:ledger:2026-11`,
    limit,
    cls: 'base' as const,
    endMs: Date.now() + 86_400_000,
    day: '26',
    month: '2026-11',
    quotaKey: `{t:${team}}:team`,
    team,
  })

  it('a team known to be used up stays refused; the fallback starts each month from the count it last saw, and says its decisions are local', async () => {
    const mem = new MemoryStore()
    let down = false
    const inner = storeOf(
      {
        consume: (ch, now) =>
          down ? Promise.reject(new StoreError('down')) : mem.consume(ch, now),
      },
      mem
    )
    const g = new GuardedStore(inner, {
      clock: systemClock,
      onError: 'open',
      fallback: new MemoryStore(),
      failuresToTrip: 1,
    })
    const full = month('globex', 3)
    const near = month('acme', 10)
    for (let i = 0; i < 3; i++) await g.consume([full], Date.now())
    for (let i = 0; i < 8; i++) await g.consume([near], Date.now())
    expect((await g.consume([full], Date.now())).allowed).toBe(false)
    down = true
    // globex: used up before the outage, refused all through it (not 3 more from a fresh count).
    for (let i = 0; i < 5; i++) {
      const d = await g.consume([full], Date.now())
      expect(d.allowed).toBe(false)
      expect(d.local).toBe(true)
    }
    // acme: 8 of 10 before it: 2 more, then refused.
    const seen = []
    for (let i = 0; i < 4; i++) seen.push((await g.consume([near], Date.now())).allowed)
    expect(seen).toEqual([true, true, false, false])
  })
})
