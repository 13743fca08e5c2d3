import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { startLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { holds } from '../../helpers/until.js'
import type { StubUpstream } from '../../helpers/stub-upstream.js'
import { useServerBehindGateway } from '../../helpers/server-version.js'

// SPEC §8 served in the test's process (issue #48; a reload by signal, two instances and the
// CLI stay in test/e2e/history.test.ts): a stub upstream that answers /server-info/ as a server of
// a chosen version (or not at all).

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const U32 = U.replace(/-/g, '')
const oldRows = `/dtable-server/api/v1/dtables/${U}/rows/`

const forwarded = (up: StubUpstream, path: string) =>
  up.seen.filter((s) => s.url.startsWith(path)).length

describe('a 6.2 server (auto): removed endpoints answered 410, counted like their class', () => {
  const s = useServerBehindGateway(startLive, { current: '6.2' }, 'rate_limits: { base: 3/min }')

  it('410 names the endpoint, the version and date, and the replacement; not forwarded', async () => {
    const r = await send(s.gw.port, { path: oldRows })
    expect(r.status).toBe(410)
    expect(r.headers['content-type']).toBe('application/json')
    expect(JSON.parse(r.body).error_msg).toBe(
      `GET ${oldRows} was removed in 5.3 (2025-06-16): The /dtable-server/ API; use /api-gateway/api/v2/dtables/{base_uuid}/...`
    )
    expect(forwarded(s.up, '/dtable-server/')).toBe(0)
    // Counted like any call of its class: the base window went down, then refuses.
    expect(r.headers['x-ratelimit-remaining']).toBe('2')
    await send(s.gw.port, { path: oldRows })
    await send(s.gw.port, { path: `/api-gateway/api/v2/dtables/${U}/metadata/` })
    expect((await send(s.gw.port, { path: oldRows })).status).toBe(429)
    const line = await s.gw.waitForLog((l) => l.status === 410)
    expect(line).toMatchObject({
      outcome: 'gone',
      removed: 'dtable-server-removed',
      class: 'base',
      key: `base:${U}`,
    })
  })

  it('issue #31 item 6: a path parameter does not move a removed endpoint out of its class', async () => {
    const U2 = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a99'
    const r = await send(s.gw.port, {
      path: `/dtable-server;a=b/api/v1/dtables/${U2}/rows/`,
      headers: { 'x-request-id': 'path-param-1' },
    })
    expect(r.status).toBe(410)
    expect(forwarded(s.up, '/dtable-server')).toBe(0)
    const line = await s.gw.waitForLog((l) => l.request_id === 'path-param-1')
    expect(line).toMatchObject({
      outcome: 'gone',
      class: 'base',
      key: `base:${U2}`,
      path: `/dtable-server;a=b/api/v1/dtables/${U2}/rows/`,
    })
  })

  it("the service's own JS client: a removed call rejected with 410 and the reason", async () => {
    const require = createRequire(import.meta.url)
    const DTableWebAPI = require('dtable-web-api').default
    const api = new DTableWebAPI().init({ server: s.gw.url, token: 'tok' })
    const err = await api
      .getTableAccessTokenByExternalLink('abcdef012345')
      .catch((e: { response: { status: number; data: unknown } }) => e)
    expect(err.response.status).toBe(410)
    const msg = (err.response.data as { error_msg: string }).error_msg
    // SPEC §6: the 410 names the endpoint by its pattern; the token never comes back.
    expect(msg).toMatch(
      /external-link-tokens\/\{token\}\/access-token\/ was removed in 6\.1 \(2026-03-19\)/
    )
    expect(msg).not.toContain('abcdef')
    expect(forwarded(s.up, '/api/v2.1/external-link-tokens/')).toBe(0)
  })

  it('/v1/history: every release newest first, with the server version', async () => {
    const r = await send(s.gw.adminPort, { path: '/v1/history' })
    const body = JSON.parse(r.body)
    expect(body.server_version).toBe('6.2')
    expect(body.versions[0]).toMatchObject({ version: '6.2', date: '2026-07-21' })
    expect(body.versions.at(-1)).toMatchObject({ version: '3.5', date: '2023-04-12' })
    const cfg = JSON.parse((await send(s.gw.adminPort, { path: '/v1/config' })).body)
    expect(cfg.server).toEqual({ version: 'auto', in_force: '6.2' })
    const metrics = (await send(s.gw.adminPort, { path: '/metrics' })).body
    expect(metrics).toContain('basegate_server_version_info{version="6.2"} 1')
  })
})

describe('a 5.2 server: deprecated endpoints forwarded with Deprecation and Link', () => {
  const s = useServerBehindGateway(startLive, { current: '5.2' })

  it('Sunset on /dtable-server/ too', async () => {
    const r = await send(s.gw.port, { path: `/dtable-server/api/v1/dtables/${U}/metadata/` })
    expect(r.status).toBe(200)
    expect(r.headers.sunset).toBe('Mon, 16 Jun 2025 00:00:00 GMT')
  })

  it('RFC 9745: @ the deprecating release (00:00 UTC), and the successor', async () => {
    const r = await send(s.gw.port, {
      path: `/dtable-db/api/v1/query/${U}/`,
      method: 'POST',
      body: '{"sql":"SELECT 1"}',
      headers: { 'content-type': 'application/json' },
    })
    expect(r.status).toBe(200)
    expect(r.headers.deprecation).toBe(`@${Date.parse('2025-02-25T00:00:00Z') / 1000}`)
    expect(r.headers.link).toBe(`</api-gateway/api/v2/dtables/${U32}/>; rel="successor-version"`)
    // RFC 8594 (issue #24): the release that removes it, 5.3, as an HTTP-date.
    expect(r.headers.sunset).toBe('Mon, 16 Jun 2025 00:00:00 GMT')
    expect(forwarded(s.up, '/dtable-db/')).toBe(1)
    // It breaks at 5.3: the log line says so, and the metric counts it.
    const line = await s.gw.waitForLog((l) => l.path === `/dtable-db/api/v1/query/${U}/`)
    expect(line.api_change).toBe('dtable-db-removed')
    const metrics = (await send(s.gw.adminPort, { path: '/metrics' })).body
    expect(metrics).toContain('basegate_api_change_calls_total{entry="dtable-db-removed"} 1')
  })
})

describe('version unknown, then known', () => {
  const version = { current: null as string | null }
  const s = useServerBehindGateway(startLive, version)

  it('unknown: no 410s and no deprecation headers, one warning; known: 410', async () => {
    const r = await send(s.gw.port, { path: oldRows })
    expect(r.status).toBe(200)
    expect(r.headers.deprecation).toBeUndefined()
    // Two more failed asks of /server-info/ after the one that warned: still one warning.
    const asks = () => s.up.seen.filter((x) => x.url.startsWith('/server-info')).length
    await s.gw.waitForLog((l) => String(l.msg).startsWith('server version unknown'))
    const warnedAt = asks()
    await holds(() => asks() >= warnedAt + 2)
    expect(
      s.gw.logs.filter((l) => l.msg?.toString().startsWith('server version unknown'))
    ).toHaveLength(1)
    version.current = '6.2'
    await s.gw.waitForLog((l) => l.msg === 'server version known' && l.server_version === '6.2')
    expect((await send(s.gw.port, { path: oldRows })).status).toBe(410)
  })
})

describe("the service's own JS client against a 5.1 server", () => {
  const s = useServerBehindGateway(startLive, { current: '5.1' })

  it('its base-scoped calls are counted per base (querySql, getDTableMetadata)', async () => {
    const require = createRequire(import.meta.url)
    const DTableWebAPI = require('dtable-web-api').default
    const api = new DTableWebAPI().init({ server: s.gw.url, token: 'tok' })
    await api.querySql(U, 'SELECT * FROM Table1 LIMIT 10')
    await api.getDTableMetadata(U)
    // 4.0 removed this one long before 5.1: answered 410.
    const gone = await api
      .getTableAccessTokenByShareLink('tok')
      .catch((e: { response: { status: number } }) => e)
    expect(gone.response.status).toBe(410)
    const usage = JSON.parse((await send(s.gw.adminPort, { path: `/v1/usage/base/${U}` })).body)
    const account = usage.windows.find((w: { class: string }) => w.class === 'account')
    expect(account.used).toBe(2)
    expect(s.up.seen.filter((seen) => seen.url.includes(U)).length).toBe(2)
  })
})
