import { describe, expect, it } from 'vitest'
import { CHECK, RedisStore } from '../../src/limiter/redis-store.js'
import { systemClock } from '../../src/clock.js'
import { BUCKETS_PER_WINDOW } from '../../src/types.js'
import { useRedis } from '../helpers/redis.js'
import { charge } from './store-contract.js'

// SPEC §12: a check of one plain window goes in the short form (check-short.lua: 4 arguments,
// answered before the script makes its functions). It must answer, and leave the window's hash,
// exactly as the long form does, whichever way the call goes: a new key, a busy key, a key
// over its limit (the short form falls through to the general path), a deadline passed.
const db = useRedis()

const LIMIT = 3
const WINDOW_MS = 60_000
const short = (deadline = 0, limit = LIMIT, windowMs = WINDOW_MS) => [
  BUCKETS_PER_WINDOW,
  limit,
  deadline,
  windowMs,
]
const long = (deadline = 0, limit = LIMIT, windowMs = WINDOW_MS) => [
  BUCKETS_PER_WINDOW,
  0,
  deadline,
  0,
  limit,
  windowMs,
  0,
  0,
  0,
  0,
  '',
  0,
]

/** A short answer { 1, now, used, resetAt } as the long form says it; the long form's as is. */
function asLong(raw: number[], limit = LIMIT): number[] {
  return raw.length === 4 ? [1, raw[1]!, raw[1]!, raw[2]!, raw[3]!, 0, limit, 1] : raw
}

/**
 * One call in each form on two keys, in one MULTI: run back to back, microseconds apart, so both
 * count the call in the same bucket of the store's clock (sent apart, they could fall either
 * side of a bucket's edge). Sent away from an edge too, so even those microseconds cannot
 * straddle one unless the MULTI is held up past the margin and lands on the edge itself.
 */
async function pair(
  admin: ReturnType<typeof db.client>,
  sha: string,
  ks: string,
  kl: string,
  limit = LIMIT,
  windowMs = WINDOW_MS
): Promise<[number[], number[]]> {
  const bucket = windowMs / BUCKETS_PER_WINDOW
  const [sec, usec] = await admin.time()
  const into = (Number(sec) * 1000 + Math.floor(Number(usec) / 1000)) % bucket
  if (into > bucket - 20) await new Promise((r) => setTimeout(r, bucket - into + 2))
  const out = (await admin
    .multi()
    .evalsha(sha, 1, ks, ...short(0, limit, windowMs))
    .evalsha(sha, 1, kl, ...long(0, limit, windowMs))
    .exec()) as [[unknown, number[]], [unknown, number[]]]
  return [out[0][1], out[1][1]]
}

/** Both keys' time to live, read in one MULTI (the same instant). */
async function ttls(admin: ReturnType<typeof db.client>, a: string, b: string): Promise<number[]> {
  const out = (await admin.multi().pttl(a).pttl(b).exec()) as [unknown, number][]
  return out.map(([, v]) => v)
}

function expectSame([s, l]: [number[], number[]], limit = LIMIT, windowMs = WINDOW_MS): void {
  const a = asLong(s, limit)
  // The clock's fields may differ by the microseconds between the two, never by a bucket.
  const bucket = windowMs / BUCKETS_PER_WINDOW
  expect(Math.floor(a[1]! / bucket)).toBe(Math.floor(l[1]! / bucket))
  expect([a[0], ...a.slice(3)]).toEqual([l[0], ...l.slice(3)])
}

describe('check.lua: the short form of one plain window', () => {
  it('answers and writes as the long form, from a new key to one over its limit', async () => {
    const admin = db.client()
    const sha = (await admin.script('LOAD', CHECK)) as string
    const ks = db.redis.prefix + 'short:{a}'
    const kl = db.redis.prefix + 'long:{a}'
    const pairs: [number[], number[]][] = []
    for (let i = 0; i < LIMIT + 2; i++) pairs.push(await pair(admin, sha, ks, kl))
    for (const p of pairs) expectSame(p)
    // Three admitted in the short form's own answer; the two past the limit refused.
    expect(pairs.map(([s]) => s.length)).toEqual([4, 4, 4, 8, 8])
    expect(pairs.map(([s]) => s[0])).toEqual([1, 1, 1, 0, 0])
    expect(await admin.hgetall(ks)).toEqual(await admin.hgetall(kl))
    const [ts, tl] = await ttls(admin, ks, kl)
    expect(ts).toBeGreaterThan(WINDOW_MS)
    expect(Math.abs(ts! - tl!)).toBeLessThan(1000)
  })

  it('as the long form while buckets open, leave the window and the limit bites (a 2.5 s window)', async () => {
    const admin = db.client()
    const sha = (await admin.script('LOAD', CHECK)) as string
    const ks = db.redis.prefix + 'moving-short:{a}'
    const kl = db.redis.prefix + 'moving-long:{a}'
    const WINDOW = 2500
    const BUCKET = WINDOW / BUCKETS_PER_WINDOW // 50 ms
    const answers: number[] = []
    // Two calls a bucket for 3 s: buckets open and leave the window, and 60 a window refuses some.
    for (let i = 0; i < 120; i++) {
      const p = await pair(admin, sha, ks, kl, 60, WINDOW)
      expectSame(p, 60, WINDOW)
      answers.push(p[0].length)
      expect(await admin.hgetall(ks)).toEqual(await admin.hgetall(kl))
      // The expiry moves when a bucket opens: an expiry not moved would be a bucket short.
      const [ts, tl] = await ttls(admin, ks, kl)
      expect(Math.abs(ts! - tl!)).toBeLessThan(BUCKET / 2)
      await new Promise((r) => setTimeout(r, BUCKET / 2)) // the scenario's pace
    }
    // Both ways went: answered short, and on to the general path (a refusal, buckets that left).
    expect(answers).toContain(4)
    expect(answers).toContain(8)
  }, 20_000)

  it('a deadline passed: neither admitted nor charged, in both forms', async () => {
    const admin = db.client()
    const sha = (await admin.script('LOAD', CHECK)) as string
    const ks = db.redis.prefix + 'late-short:{a}'
    const kl = db.redis.prefix + 'late-long:{a}'
    expect(((await admin.evalsha(sha, 1, ks, ...short(1))) as number[])[0]).toBe(-1)
    expect(((await admin.evalsha(sha, 1, kl, ...long(1))) as number[])[0]).toBe(-1)
    expect(await admin.exists(ks, kl)).toBe(0)
  })

  it('RedisStore sends one plain window in the short form, and two windows in the long', async () => {
    const client = db.client()
    await client.ping() // its ready check's INFO done before MONITOR starts (it would echo there)
    const store = new RedisStore(client, { clock: systemClock, prefix: db.redis.prefix + 'rs:' })
    const sent: number[] = []
    const watcher = db.client({ enableReadyCheck: false })
    const monitor = await watcher.monitor()
    let ended = () => {}
    const seen = new Promise<void>((r) => (ended = r))
    monitor.on('monitor', (_t: string, args: string[]) => {
      const name = String(args[0]).toLowerCase()
      if (name === 'evalsha' || name === 'eval') sent.push(args.length - 3 - Number(args[2]))
      if (name === 'echo' && args[1] === 'check-short:end') ended()
    })
    // MONITOR starts once the server has said OK; one round trip more makes sure.
    await watcher.ping().catch(() => {})
    const one = await store.consume([charge(LIMIT)], Date.now())
    expect(one).toMatchObject({ allowed: true, windows: [{ used: 1, limit: LIMIT, remaining: 2 }] })
    await store.consume([charge(LIMIT), { ...charge(10), key: 'other' }], Date.now())
    // MONITOR tells commands in the order Redis ran them: the marker comes after both checks.
    await client.echo('check-short:end')
    await seen
    monitor.disconnect()
    // The arguments after the keys: 4 (short), 4 + 8 per window (long).
    expect(sent).toEqual([4, 20])
  })
})
