import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { keys } from '../../src/limiter/keys.js'
import { BUCKETS_PER_WINDOW } from '../../src/types.js'
import { CallerClockRedisStore } from '../helpers/caller-clock.js'
import { useRedis } from '../helpers/redis.js'
import { charge } from './store-contract.js'
import { systemClock } from '../../src/clock.js'

// Issue #21: the window script became two (check, give-back) on a shared prelude. During a
// rolling upgrade 0.4.0 instances (one script, modes 0/1/3) and this build count in the same
// keys (the layout, `:l2`, is unchanged), so each must read and write what the other wrote.
// 0.4.0's script is kept as a fixture and run as 0.4.0 ran it.

const db = useRedis()
const OLD = readFileSync(
  new URL('../fixtures/lua/sliding-window-0.4.0.lua', import.meta.url),
  'utf8'
)
const BUCKET = 60_000 / BUCKETS_PER_WINDOW
const T0 = Math.floor(Date.now() / BUCKET) * BUCKET + 100

/** One call of 0.4.0's script on one sliding window: mode 0 charge, 1 peek, 3 give back. */
async function old(
  prefix: string,
  c: { key: string; limit: number; windowMs: number },
  mode: 0 | 1 | 3,
  nowMs: number,
  units = 0
): Promise<{ allowed: number; used: number }> {
  const client = db.client()
  // ARGV: buckets, cost, mode, deadline, callerNow, then limit, windowMs, endMs (the charge
  // time on a give-back), overrideIndex, shadow, ask/units.
  const endMs = mode === 3 ? nowMs : 0
  const raw = (await client.eval(
    OLD,
    1,
    prefix + c.key,
    BUCKETS_PER_WINDOW,
    1,
    mode,
    0,
    nowMs,
    c.limit,
    c.windowMs,
    endMs,
    0,
    0,
    units
  )) as number[]
  return { allowed: raw[0]!, used: raw[3] ?? 0 }
}

describe('0.4.0 and this build on one Redis (rolling upgrade)', () => {
  it('count in the same window: each sees and refuses on what the other charged', async () => {
    const prefix = `${db.redis.prefix}roll:`
    const store = new CallerClockRedisStore(db.client(), { clock: systemClock, prefix })
    const c = charge(10, 60_000, keys.cls('base:rolling', 'base', 60_000))
    for (let i = 0; i < 4; i++) expect((await old(prefix, c, 0, T0 + i)).allowed).toBe(1)
    const d = await store.consume([c], T0 + 10)
    expect(d.windows[0]!.used).toBe(5)
    for (let i = 0; i < 5; i++) expect((await store.consume([c], T0 + 20 + i)).allowed).toBe(true)
    // Full at 10, whoever charged it.
    expect((await old(prefix, c, 0, T0 + 30)).allowed).toBe(0)
    expect((await store.consume([c], T0 + 31)).allowed).toBe(false)
    expect((await old(prefix, c, 1, T0 + 32)).used).toBe(10)
  })

  it("gives back into the other's buckets, and the window reopens a window later", async () => {
    const prefix = `${db.redis.prefix}roll2:`
    const store = new CallerClockRedisStore(db.client(), { clock: systemClock, prefix })
    const c = charge(1000, 60_000, keys.cls('base:rolling2', 'base', 60_000))
    // A 0.4.0 instance leased a share of 20 (mode 0 with an ask); this build gives 15 back.
    const client = db.client()
    await client.eval(
      OLD,
      1,
      prefix + c.key,
      BUCKETS_PER_WINDOW,
      1,
      0,
      0,
      T0,
      c.limit,
      c.windowMs,
      0,
      0,
      0,
      20
    )
    expect((await store.peek([c], T0 + 1)).windows[0]!.used).toBe(20)
    await store.giveBack([{ charge: c, units: 15, atMs: T0 }])
    expect((await old(prefix, c, 1, T0 + 2)).used).toBe(5)
    // And the other way: this build charges, 0.4.0 gives back.
    await store.consume([c], T0 + BUCKET + 5)
    await old(prefix, c, 3, T0 + BUCKET + 5, 1)
    expect((await store.peek([c], T0 + BUCKET + 6)).windows[0]!.used).toBe(5)
    // Past one window and a bucket, nothing is counted on either side.
    expect((await store.peek([c], T0 + 60_000 + 2 * BUCKET)).windows[0]!.used).toBe(0)
    expect((await old(prefix, c, 1, T0 + 60_000 + 2 * BUCKET)).used).toBe(0)
  })
})
