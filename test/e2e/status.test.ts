import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYamlWithToken, type GatewayProcess } from '../helpers/gateway-process.js'
import { rowsPath, send } from '../helpers/http.js'
import { useRedis } from '../helpers/redis.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #25 / SPEC §7: GET /v1/status and the page at GET /, behind the admin token. The page
// in a real browser: test/tools/status-page.test.ts (.ci/tools installs Chromium).

const TOKEN = 'status-token-abcdef012345'
const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const basic = (user: string, pass: string) =>
  `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`

describe.each([1, 2])('GET /v1/status, %i process(es)', (workers) => {
  const db = useRedis()
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(
      testYamlWithToken(
        up.url,
        TOKEN,
        `workers: ${workers}
store: { url: "${db.redis.url}", prefix: "${db.redis.prefix}st${workers}:" }
rate_limits: { base: 3/min }
protect: { max_in_flight: 4 }
monthly: { enabled: true, plans: { p: { calls: 100 } }, teams: [ { id: acme, plan: p, bases: ["${U}"] } ] }`
      )
    )
  }, 30_000)
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('needs the token (Bearer, or Basic with it as the password); the page asks a browser for Basic', async () => {
    const page = await send(gw.adminPort, { path: '/' })
    expect(page.status).toBe(401)
    expect(page.headers['www-authenticate']).toMatch(/^Basic realm="basegate"/)
    expect((await send(gw.adminPort, { path: '/v1/status' })).status).toBe(401)
    const wrong = await send(gw.adminPort, {
      path: '/',
      headers: { authorization: basic('a', 'x') },
    })
    expect(wrong.status).toBe(401)
    const ok = await send(gw.adminPort, {
      path: '/',
      headers: { authorization: basic('a', TOKEN) },
    })
    expect(ok.status).toBe(200)
    expect(ok.headers['content-type']).toMatch(/text\/html/)
    expect(ok.body).toContain('/v1/status')
    // No asset from outside: nothing but this origin.
    expect(ok.body).not.toMatch(/(src|href)="https?:/)
    expect(ok.headers['content-security-policy']).toContain("default-src 'none'")
  })

  it('shows the calls by class and outcome, the busiest keys, the team month and the masked config', async () => {
    for (let i = 0; i < 5; i++) await send(gw.port, { path: rowsPath(U) })
    await send(gw.port, { path: '/workspace/1/' })
    const s = JSON.parse(
      (
        await send(gw.adminPort, {
          path: '/v1/status',
          headers: { authorization: `Bearer ${TOKEN}` },
        })
      ).body
    )
    const total = (n: string) => (s.traffic.series[n] as number[]).reduce((a, b) => a + b, 0)
    expect(total('base/forwarded')).toBe(3)
    expect(total('base/rate_limited')).toBe(2)
    expect(total('other/forwarded')).toBe(1)
    expect(s.refusals).toEqual({ rate: 2 })
    // Issue #34: a busiest key names the team it counts under; issue #41: by its hyphenated
    // UUID, its admitted and refused calls apart.
    expect(s.busiest[0]).toEqual({
      key: `base:${U.replace(/-/g, '')}`,
      name: `base ${U.toLowerCase()}`,
      calls: 5,
      admitted: 3,
      refused: 2,
      team: 'acme',
    })
    // Issue #33 adds the month's days and the pace to each team; their figures are tested in
    // test/e2e/usage-history.test.ts.
    expect(s.teams).toHaveLength(1)
    expect(s.teams[0]).toMatchObject({ id: 'acme', used: 3, quota: 100, share: 0.03 })
    // The month's days so far: the first to today.
    expect(s.teams[0].days[0].date).toMatch(/^\d{4}-\d{2}-01$/)
    expect(s.teams[0].days.length).toBeLessThanOrEqual(s.teams[0].days_in_month)
    expect(typeof s.teams[0].pace.projected).toBe('number')
    expect(s.processes).toBe(workers)
    expect(s.store).toEqual({
      kind: 'redis',
      ready: true,
      state: 'ok',
      since_ms: null,
      error: null,
      last: null,
      episodes: [],
    })
    expect(s.config.admin.token).toBe('****')
    expect(JSON.stringify(s)).not.toContain(TOKEN)
    // SPEC §9 under workers: each holds its share of the ceiling; the primary sums them.
    expect(s.protect).toMatchObject({ max_in_flight: 4, ceiling: 4 })
    const metrics = await send(gw.adminPort, {
      path: '/metrics',
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    expect(metrics.body).toMatch(/^basegate_protect_ceiling 4$/m)
  })
})
