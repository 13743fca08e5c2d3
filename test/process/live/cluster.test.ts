import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Agent, request } from 'undici'
import { Cluster } from 'ioredis'
import { systemClock } from '../../../src/clock.js'
import { RedisStore } from '../../../src/limiter/redis-store.js'
import { runOnce, testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { startLive, useLive } from '../../helpers/live.js'
import { rowsPath, send } from '../../helpers/http.js'
import { clusterList, startCluster, type TestCluster } from '../../helpers/redis-cluster.js'
import { startStubUpstream, type StubUpstream } from '../../helpers/stub-upstream.js'
import { metricSum } from '../../helpers/metrics.js'

// Two instances on a real Redis Cluster, served in the test's process (issue #48).

const TEAM_BASE = 'acacacac-0d3b-4c59-9a51-3e2d7c8b9a10'

describe('two instances on a real Redis Cluster', () => {
  // A store timeout above a loaded machine's slowest answer: one call past it is decided by
  // its instance's fallback (on_error: open, SPEC §1), which the exact bound below does not
  // allow for (61 for 60 once, under the whole suite on a slow box; 3 of 3 alone).
  const live = useLive(
    (up, cluster) =>
      testYaml(
        up.url,
        `store: { cluster: ${clusterList(cluster!)}, timeout_ms: 2000 }
client_ip: { trusted_proxies: [127.0.0.0/8] }
# every base kept by name (SPEC §4): the per-base counts are what this test reads
usage: { keep_after: 0 }
rate_limits: { base: 60/min, ip_ceiling: 10/min }
monthly: { enabled: true, plans: { p: { calls: 100 } }, teams: [ { id: acme, plan: p, bases: ["${TEAM_BASE}"] } ] }`
      ),
    { cluster: true, instances: 2, env: { BASEGATE_USAGE_FLUSH_MS: '300' } }
  )
  const gws = live.gws

  it('admits no more than the limit from a concurrent burst, across both instances', async () => {
    const agent = new Agent({ connections: 20 })
    const statuses = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const r = await request(
          `${gws[i % 2]!.url}${rowsPath('dddddddd-0d3b-4c59-9a51-3e2d7c8b9a10')}`,
          {
            dispatcher: agent,
            headers: { 'x-forwarded-for': `10.9.${i % 250}.${(i >> 3) % 250}` },
          }
        )
        await r.body.dump()
        return r.statusCode
      })
    )
    await agent.close()
    const admitted = statuses.filter((s) => s === 200).length
    // Exact while the store answers. A call the store failed (an error, or past timeout_ms on a
    // loaded box) is decided by its instance's fallback (on_error: open, SPEC §1), which may
    // admit it: 62 for 60 once in CI, under the whole suite. So the fallback's decisions are
    // read, and only they may add to the limit.
    let fallbacks = 0
    for (const g of gws) {
      const text = (await send(g.adminPort, { path: '/metrics' })).body
      fallbacks += metricSum(text, 'basegate_store_fallback_decisions_total')
    }
    expect(Number.isFinite(fallbacks)).toBe(true)
    if (fallbacks === 0) expect(admitted).toBe(60)
    else {
      expect(admitted).toBeGreaterThanOrEqual(60)
      expect(admitted).toBeLessThanOrEqual(60 + fallbacks)
    }
  })

  it('the IP ceiling (another slot) and the base windows stay all or nothing', async () => {
    const ip = { 'x-forwarded-for': '198.51.100.77' }
    const statuses: number[] = []
    for (let i = 0; i < 12; i++) {
      const u = `${(0xe0 + i).toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
      statuses.push((await send(gws[i % 2]!.port, { path: rowsPath(u), headers: ip })).status)
    }
    expect(statuses).toEqual([...Array(10).fill(200), 429, 429])
    // The refused calls were refunded on their bases: each of those bases has one call left of 60 unused.
    const u11 = `${(0xe0 + 11).toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
    const usage = await send(gws[0]!.adminPort, { path: `/v1/usage/base/${u11}` })
    const base = JSON.parse(usage.body).windows.find((w: { class: string }) => w.class === 'base')
    expect(base.used).toBe(0)
  })

  // Issue #33: each subject's month is one hash in one slot; one flush writes to many slots.
  it('adds up the calls per day of bases in many slots and a team, and credits the team, across both instances', async () => {
    const admin = async (
      g: Gateway,
      path: string,
      init: Omit<Parameters<typeof send>[1], 'path'> = {}
    ) => send(g.adminPort, { ...init, path })
    const day = new Date().toISOString().slice(0, 10)
    const bases = Array.from(
      { length: 20 },
      (_, i) => `${(0xb0 + i).toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
    )
    for (const [i, u] of bases.entries())
      for (let k = 0; k < 1 + (i % 3); k++)
        await send(gws[(i + k) % 2]!.port, {
          path: rowsPath(u),
          headers: { 'x-forwarded-for': `10.33.${i}.${k}` },
        })
    for (let k = 0; k < 4; k++)
      await send(gws[k % 2]!.port, {
        path: rowsPath(TEAM_BASE),
        headers: { 'x-forwarded-for': `10.34.0.${k}` },
      })
    // A read of an instance's usage writes what it holds first: both, before any is judged.
    for (const g of gws) await admin(g, `/v1/usage/history?base=${TEAM_BASE}&from=${day}&to=${day}`)
    for (const [i, u] of bases.entries()) {
      const r = await admin(gws[i % 2]!, `/v1/usage/history?base=${u}&from=${day}&to=${day}`)
      expect(JSON.parse(r.body).days).toEqual([{ date: day, calls: 1 + (i % 3), credited: 0 }])
    }
    const team = JSON.parse((await admin(gws[1]!, '/v1/usage/history?team=acme')).body)
    expect(team.days.at(-1)).toEqual({ date: day, calls: 4, credited: 0 })
    expect(team).toMatchObject({ used: 4, quota: 100 })
    const credit = await admin(gws[0]!, '/v1/teams/acme/credit', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"calls": 3}',
    })
    expect(credit.status).toBe(200)
    const after = JSON.parse((await admin(gws[1]!, '/v1/usage/history?team=acme')).body)
    expect(after.used).toBe(1)
    // SPEC §5 one ledger on a Cluster too: used = Σ days − Σ credits, the credit an entry.
    expect(after.days.at(-1)).toEqual({ date: day, calls: 4, credited: 3 })
    const credits = JSON.parse((await admin(gws[1]!, '/v1/teams/acme/credits')).body)
    expect(credits.credits).toEqual([
      expect.objectContaining({ calls: 3, asked: 3, used_before: 4, used_after: 1 }),
    ])
  })

  it('a store on the Cluster is ready only once its client runs commands (boot waits for that)', async () => {
    // ioredis sends CLUSTER INFO before it has the slots, and refuses the scripts until then:
    // 0.7.7 let an instance in on CLUSTER INFO alone, and its first calls found the store down
    // (its breaker then held it for down a second: 12 calls over the IP ceiling all admitted).
    for (let round = 0; round < 5; round++) {
      const client = new Cluster(
        live.cluster.ports.map((port) => ({ host: '127.0.0.1', port })),
        { enableOfflineQueue: false }
      )
      const store = new RedisStore(client, {
        prefix: 'ready-test:',
        cluster: true,
        clock: systemClock,
      })
      while (!(await store.ready())) await new Promise((r) => setTimeout(r, 2))
      await expect(client.set(`ready-test:${round}`, '1', 'PX', 10_000)).resolves.toBe('OK')
      client.disconnect()
    }
  })

  it('reports ready while the cluster serves every slot', async () => {
    expect((await send(gws[0]!.adminPort, { path: '/readyz' })).status).toBe(200)
  })
})

// Issue #21: `basegate upgrade-report` built its own Redis client, without the Cluster's
// password and TLS that the gateway's client has: on a password-protected Cluster it could not
// read the report.
describe('upgrade-report on a password-protected Redis Cluster (regression)', () => {
  let cluster: TestCluster
  let up: StubUpstream

  beforeAll(async () => {
    cluster = await startCluster({ password: 's3cret-pw' })
    up = await startStubUpstream()
  }, 60_000)
  afterAll(async () => {
    await up?.close()
    await cluster?.stop()
  })

  it('the command reads the counts the gateway wrote, through the same client', async () => {
    const U = 'abababab-0d3b-4c59-9a51-3e2d7c8b9a10'
    const yaml = testYaml(
      up.url,
      `store: { cluster: ${clusterList(cluster)}, timeout_ms: 500 }\nserver: { version: "5.1" }\nusage: { keep_after: 0 }`
    )
    const gw = await startLive(yaml, { env: { BASEGATE_REPORT_FLUSH_MS: '100' } })
    for (let i = 0; i < 3; i++)
      expect(
        (await send(gw.port, { path: `/dtable-server/api/v1/dtables/${U}/rows/` })).status
      ).toBe(200)
    await gw.stop() // its stop writes what it holds; the command reads the store itself
    const r = await runOnce(['upgrade-report', '--to', '6.2', '--config', gw.configFile])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/dtable-server-removed/)
    expect(r.stdout).toMatch(new RegExp(`3\\s+base:${U}`)) // hyphenated (SPEC §7)
  })
})
