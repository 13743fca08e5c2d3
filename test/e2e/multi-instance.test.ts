import { describe, expect, it } from 'vitest'
import { Redis } from 'ioredis'
import { Agent, request } from 'undici'
import { rowsPath } from '../helpers/http.js'
import type { GatewayProcess } from '../helpers/gateway-process.js'
import { useInstances } from '../helpers/instances.js'

/** 450 concurrent calls on one base, spread over the instances; their statuses. */
async function burst(gws: readonly GatewayProcess[], uuid: string): Promise<number[]> {
  const agent = new Agent({ connections: 20 })
  const statuses = await Promise.all(
    Array.from({ length: 450 }, async (_, i) => {
      const r = await request(`${gws[i % gws.length]!.url}${rowsPath(uuid)}`, { dispatcher: agent })
      await r.body.dump()
      return r.statusCode
    })
  )
  await agent.close()
  return statuses
}

describe('three instances sharing one redis-server', () => {
  const { gws } = useInstances({
    count: 3,
    yaml: (redis) =>
      `store: { url: "${redis.url}", prefix: "${redis.prefix}" }\nrate_limits: { base: 100/min }`,
  })

  it('admits no more than the limit from a concurrent burst at one key, across all instances', async () => {
    const statuses = await burst(gws, 'aaaaaaaa-0d3b-4c59-9a51-3e2d7c8b9a10')
    const admitted = statuses.filter((s) => s === 200).length
    const refused = statuses.filter((s) => s === 429).length
    expect(admitted).toBe(100)
    expect(refused).toBe(350)
    // Each instance admitted some: the count really was shared.
    for (const g of gws) {
      const lines = g.logs.filter((l) => l.status === 200 && l.class === 'base')
      expect(lines.length).toBeGreaterThan(0)
    }
  })
})

describe('three instances sharing one redis-server, leases on (issue #14)', () => {
  const set = useInstances({
    count: 3,
    yaml: (redis) =>
      // A store call slower than the default 100 ms (a loaded machine: the whole suite runs
      // beside it) would be decided by the local fallback, uncounted in Redis; these tests are
      // about shares, so the store gets a second.
      `store: { url: "${redis.url}", prefix: "${redis.prefix}", leases: true, timeout_ms: 1000 }\nrate_limits: { base: 100/min }`,
  })

  it('admits the limit from a burst at one key, some of it from shares, short only by calls of shares left unused, and leaves no share counted', async () => {
    const { gws, redis } = set
    const statuses = await burst(gws, 'bbbbbbbb-0d3b-4c59-9a51-3e2d7c8b9a10')
    const admitted = statuses.filter((s) => s === 200).length
    expect(admitted + statuses.filter((s) => s === 429).length).toBe(450)
    // Never one too many (SPEC §3).
    expect(admitted).toBeLessThanOrEqual(100)
    const metric = async (name: string) => {
      let sum = 0
      for (const g of gws) {
        const r = await request(`${g.adminUrl}/metrics`)
        const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(await r.body.text())
        sum += Number(m?.[1] ?? 0)
      }
      return sum
    }
    expect(await metric('basegate_lease_admits_total')).toBeGreaterThan(0)
    // Once every share's bucket has ended (1.2 s buckets) and its rest was given back, the
    // store counts the admitted calls and nothing more.
    const admin = new Redis(redis.url)
    const [key] = (await admin.keys(`${redis.prefix}{b:bbbbbbbb*`)).filter((k) =>
      k.includes(':base:')
    )
    const deadline = Date.now() + 8000
    while (
      ((await metric('basegate_lease_calls_held')) > 0 ||
        Number(await admin.hget(key!, 't')) !== admitted) &&
      Date.now() < deadline
    )
      await new Promise((r) => setTimeout(r, 100))
    expect(Number(await admin.hget(key!, 't'))).toBe(admitted)
    admin.disconnect()
    // A call is refused only when the window is full; short of the limit, what filled it was
    // shares another call never came to use (they were counted until their bucket ended, then
    // given back): the shortfall is at most the calls given back unused. On a quiet machine
    // this is 100 admitted; beside a busy neighbour a share can end before its instance reaches
    // its queued calls (README, "On a busy machine").
    expect(100 - admitted).toBeLessThanOrEqual(await metric('basegate_lease_returned_total'))
  })
  it('gives its unused shares back when stopped with SIGTERM', async () => {
    const { gws, redis } = set
    const uuid = 'cccccccc-0d3b-4c59-9a51-3e2d7c8b9a10'
    for (let i = 0; i < 30; i++) {
      const r = await request(`${gws[0]!.url}${rowsPath(uuid)}`)
      await r.body.dump()
      expect(r.statusCode).toBe(200)
    }
    const admin = new Redis(redis.url)
    const [key] = (await admin.keys(`${redis.prefix}{b:cccccccc*`)).filter((k) =>
      k.includes(':base:')
    )
    // A share is held (counted beyond the calls admitted), unless its bucket just ended.
    const before = Number(await admin.hget(key!, 't'))
    expect(before).toBeGreaterThanOrEqual(30)
    await gws[0]!.stop()
    expect(Number(await admin.hget(key!, 't'))).toBe(30)
    admin.disconnect()
  })
})
