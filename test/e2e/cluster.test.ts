import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Agent, request } from 'undici'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { rowsPath, send } from '../helpers/http.js'
import { startCluster, type TestCluster } from '../helpers/redis-cluster.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

describe('two instances on a real Redis Cluster', () => {
  let cluster: TestCluster
  let up: StubUpstream
  const gws: GatewayProcess[] = []

  beforeAll(async () => {
    cluster = await startCluster()
    up = await startStubUpstream()
    const yaml = testYaml(
      up.url,
      `store: { cluster: [${cluster.urls.map((u) => `"${u}"`).join(', ')}], timeout_ms: 500 }
client_ip: { trusted_proxies: [127.0.0.0/8] }
rate_limits: { base: 60/min, ip_ceiling: 10/min }`
    )
    gws.push(await startGateway(yaml), await startGateway(yaml))
  }, 60_000)
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()))
    await up?.close()
    await cluster?.stop()
  })

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
    expect(statuses.filter((s) => s === 200).length).toBe(60)
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

  it('reports ready while the cluster serves every slot', async () => {
    expect((await send(gws[0]!.adminPort, { path: '/readyz' })).status).toBe(200)
  })
})
