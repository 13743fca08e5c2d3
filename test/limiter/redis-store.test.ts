import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { RedisStore } from '../../src/limiter/redis-store.js'
import { StoreError } from '../../src/limiter/store-error.js'
import { evalCalls, useRedis } from '../helpers/redis.js'
import { calendarContract, charge, storeContract } from './store-contract.js'

const db = useRedis()
let made = 0
// As in production: auto-pipelining on a single Redis.
const client = () => db.client({ enableAutoPipelining: true })

// Each store gets its own client, as separate gateway instances would.
storeContract('RedisStore', {
  make: async () =>
    new RedisStore(client(), { prefix: `${db.redis.prefix}${made++}:`, clock: 'caller' }),
})
calendarContract('RedisStore', {
  make: async () =>
    new RedisStore(client(), { prefix: `${db.redis.prefix}${made++}:`, clock: 'caller' }),
})

describe('RedisStore against a real redis-server', () => {
  it('keeps one bounded hash per key with a TTL of about one window', async () => {
    const prefix = `${db.redis.prefix}mem:`
    const store = new RedisStore(client(), { prefix, clock: 'caller' })
    const c = charge(1_000_000)
    const t0 = Date.now()
    for (let i = 0; i < 3000; i++) await store.consume([c], t0 + i * 200)
    const admin = client()
    expect(await admin.hlen(prefix + c.key)).toBeLessThanOrEqual(51)
    const ttl = await admin.pttl(prefix + c.key)
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(60_000 + 2 * 1_200)
  })

  it('shares counts between stores (instances) on one Redis', async () => {
    const prefix = `${db.redis.prefix}shared:`
    const stores = [0, 1, 2].map(() => new RedisStore(client(), { prefix, clock: 'caller' }))
    const c = charge(30)
    const t = Date.now()
    const results = await Promise.all(
      Array.from({ length: 90 }, (_, i) => stores[i % 3]!.consume([c], t))
    )
    expect(results.filter((r) => r.allowed).length).toBe(30)
  })

  it('uses one EVALSHA per request for all its windows', async () => {
    const admin = client()
    const store = new RedisStore(client(), { prefix: `${db.redis.prefix}rt:`, clock: 'caller' })
    await store.consume([charge(5)], Date.now()) // loads the script
    const before = await evalCalls(admin)
    for (let i = 0; i < 20; i++)
      await store.consume([charge(5), charge(10), charge(100, 3_600_000)], Date.now())
    const after = await evalCalls(admin)
    // Other suites may share this server; this one's 20 calls are the floor and, on a server
    // of its own, the whole count.
    expect(after - before).toBeGreaterThanOrEqual(20)
    if (!process.env.REDIS_URL) expect(after - before).toBe(20)
  })

  it('throws StoreError when Redis does not answer', async () => {
    const dead = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      commandTimeout: 100,
    })
    dead.on('error', () => {})
    db.track(dead)
    const store = new RedisStore(dead, { prefix: 'x:' })
    await expect(store.consume([charge(1)], Date.now())).rejects.toBeInstanceOf(StoreError)
    expect(await store.ready()).toBe(false)
  })
})

describe('RedisStore: a quota override in the store', () => {
  it('applies the `quota` field of the limit key from the next call, for every instance', async () => {
    const prefix = `${db.redis.prefix}override:`
    const a = new RedisStore(client(), { prefix, clock: 'caller' })
    const b = new RedisStore(client(), { prefix, clock: 'caller' })
    const m = {
      key: '{t:acme}:month:2026-11',
      limit: 2,
      windowMs: 0,
      endMs: Date.now() + 86_400_000,
      kind: 'monthly' as const,
      cls: 'base' as const,
      team: 'acme',
      limitKey: '{t:acme}:team',
    }
    const now = Date.now()
    expect((await a.consume([m], now)).allowed).toBe(true)
    expect((await b.consume([m], now)).allowed).toBe(true)
    expect((await a.consume([m], now)).allowed).toBe(false)
    // An admin raises the quota in the store; instance b, whose own view still says 2, admits.
    await client().hset(`${prefix}{t:acme}:team`, 'quota', 3)
    const d = await b.consume([m], now)
    expect(d.allowed).toBe(true)
    expect(d.windows[0]).toMatchObject({ limit: 3, used: 3, remaining: 0 })
  })
})
