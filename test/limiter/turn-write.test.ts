import type { Redis } from 'ioredis'
import { createHook } from 'node:async_hooks'
import { describe, expect, it } from 'vitest'
import { redisClient } from '../../src/limiter/redis-client.js'
import { RedisStore } from '../../src/limiter/redis-store.js'
import { systemClock } from '../../src/clock.js'
import { useRedis } from '../helpers/redis.js'
import { charge } from './store-contract.js'

// Issue #22 and SPEC §12: one turn's checks reach Redis as one write, however many there are.
// 0.7.5 writes them on the corked socket instead of an ioredis pipeline (whose objects outlived
// the young generation's collections); this holds the write count either way. A server of its
// own: Redis's count of the reads it processed is the whole server's.
const db = useRedis({ own: true })

async function readsProcessed(admin: Redis): Promise<number> {
  const info = await admin.info('stats')
  return Number(/total_reads_processed:(\d+)/.exec(info)![1])
}

/** The gateway's own client (store.timeout_ms 1 s: ioredis's backstop 10 s) and a store on it. */
async function gatewayStore(prefix: string): Promise<{ client: Redis; store: RedisStore }> {
  const client = db.track(
    redisClient({
      url: db.redis.url,
      cluster: [],
      prefix: 'x:',
      timeoutMs: 1000,
      onError: 'open',
      leases: false,
      memoryKeys: 200_000,
    }) as Redis
  )
  await new Promise((r) => client.once('ready', r))
  return { client, store: new RedisStore(client, { clock: systemClock, prefix, timeoutMs: 1000 }) }
}

describe('RedisStore: a turn of checks', () => {
  it('goes to Redis in one write under one timer, and each call gets its own answer', async () => {
    const { client, store } = await gatewayStore('turn:')
    // The script loaded and the store clock's offset known: what follows is the steady state.
    await store.consume([charge(1000, 60_000, 'warm')], Date.now())

    const admin = db.client()
    await admin.ping()
    const before = await readsProcessed(admin)
    let timers = 0
    const hook = createHook({ init: (_id, type) => void (type === 'Timeout' && timers++) })
    hook.enable()
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        store.consume([charge(i < 20 ? 1000 : 0, 60_000, `k${i % 20}`)], Date.now())
      )
    )
    hook.disable()
    const after = await readsProcessed(admin)
    // One timer bounds the turn (store.timeout_ms); ioredis's per-command backstop
    // (commandTimeout, set on this client as on the gateway's) sets none for these.
    expect(timers).toBe(1)
    // and the backstop is back for every other command
    expect(client.options.commandTimeout).toBe(10_000)
    // One read for the turn's 40 scripts, one for the INFO that counts it.
    expect(after - before).toBe(2)
    // Answers in order, each its own: the first 20 under a limit of 1,000, the next 20 (the
    // same keys, a limit of 0) refused.
    expect(answers.map((a) => a.allowed)).toEqual([
      ...Array<boolean>(20).fill(true),
      ...Array<boolean>(20).fill(false),
    ])
    expect(answers[0]!.windows[0]!.used).toBe(1)
  })

  it('after Redis lost its scripts (SCRIPT FLUSH, a restart), the next turn is answered all the same', async () => {
    const { store } = await gatewayStore('flush:')
    await store.consume([charge(1000, 60_000, 'f')], Date.now())
    await db.client().script('FLUSH')
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => store.consume([charge(1000, 60_000, 'f')], Date.now()))
    )
    expect(answers.map((a) => a.windows[0]!.used).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6])
  })
})
