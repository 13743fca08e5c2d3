import { describe, expect, it } from 'vitest'
import { testYamlWithToken } from '../../helpers/gateway-process.js'
import { useLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { metricOf } from '../../helpers/metrics.js'

// Issue #31 item 5 (SPEC §7): a state-changing admin call that a browser marks as sent from
// another site is refused 403, and no admin answer may be cached. The same calls from a real
// Chromium page on another origin: test/tools/admin-cross-site.test.ts (.ci/tools).

const TOKEN = 'cross-site-token-0123456789'
const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

describe('the admin API against browsers (issue #31 item 5)', () => {
  const live = useLive((up) =>
    testYamlWithToken(
      up.url,
      TOKEN,
      `monthly: { enabled: true, plans: { p: { calls: 100 } }, teams: [ { id: acme, plan: p, bases: ["${U}"] } ] }`
    )
  )

  const auth = { authorization: `Bearer ${TOKEN}` }
  const own = () => `http://127.0.0.1:${live.gw.adminPort}`
  // Reloads tried, as the gateway counts them (its answer, not a log line).
  const reloads = async () =>
    (await metricOf(live.gw.adminUrl, 'basegate_config_reloads_total', auth)) || 0

  it.each([
    ['an Origin of another site', { origin: 'http://evil.example' }],
    ['an Origin of another port on this host', { origin: 'http://127.0.0.1:1' }],
    ['Origin: null (a sandboxed page, a file)', { origin: 'null' }],
    ['Sec-Fetch-Site: cross-site', { 'sec-fetch-site': 'cross-site' }],
    ['Sec-Fetch-Site: same-site', { 'sec-fetch-site': 'same-site' }],
  ])('POST /v1/reload with %s: 403, nothing reloaded', async (_name, headers) => {
    const before = await reloads()
    const a = await send(live.gw.adminPort, {
      method: 'POST',
      path: '/v1/reload',
      headers: { ...auth, ...headers },
    })
    expect(a.status).toBe(403)
    expect(JSON.parse(a.body).error_msg).toMatch(/refused from another site/)
    expect(a.headers['cache-control']).toBe('no-store')
    expect(await reloads()).toBe(before)
  })

  it('PUT and DELETE are refused the same way; the team is unchanged', async () => {
    const put = await send(live.gw.adminPort, {
      method: 'PUT',
      path: '/v1/teams/acme',
      headers: { ...auth, 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' },
      body: '{"users":500}',
    })
    expect(put.status).toBe(403)
    const del = await send(live.gw.adminPort, {
      method: 'DELETE',
      path: '/v1/teams/acme',
      headers: { ...auth, origin: 'http://evil.example' },
    })
    expect(del.status).toBe(403)
    const teams = JSON.parse(
      (await send(live.gw.adminPort, { path: '/v1/teams', headers: auth })).body
    )
    expect(teams.teams[0].changed).toBe(false)
  })

  it('the listener’s own origin, same-origin, none, or no header at all (curl, the CLI) still change state', async () => {
    for (const headers of [
      { origin: own() },
      { 'sec-fetch-site': 'same-origin', origin: own() },
      { 'sec-fetch-site': 'none' },
      {},
    ]) {
      const a = await send(live.gw.adminPort, {
        method: 'POST',
        path: '/v1/reload',
        headers: { ...auth, ...headers },
      })
      expect(a.status).toBe(200)
    }
    expect(await reloads()).toBeGreaterThanOrEqual(4)
  })

  it('a cross-site GET (reading, the page) is not refused by the guard', async () => {
    const a = await send(live.gw.adminPort, {
      path: '/v1/status',
      headers: { ...auth, 'sec-fetch-site': 'cross-site', origin: 'http://evil.example' },
    })
    expect(a.status).toBe(200)
  })

  it('every admin answer carries Cache-Control: no-store', async () => {
    const calls: [string, string, Record<string, string>][] = [
      ['GET', '/healthz', {}],
      ['GET', '/readyz', {}],
      ['GET', '/metrics', auth],
      ['GET', '/v1/teams', auth],
      ['GET', '/v1/config', auth],
      ['GET', '/v1/status', auth],
      ['GET', '/', auth],
      ['GET', `/v1/usage/base/${U}`, auth],
      ['GET', '/v1/usage/ip/127.0.0.1', auth],
      ['GET', '/v1/history', auth],
      ['GET', '/v1/upgrade-report?to=6.2', auth],
      ['GET', '/v1/overrides', auth],
      ['GET', '/v1/protect', auth],
      ['GET', '/v1/teams', {}], // 401
      ['GET', '/nothing-here', auth], // 404
      ['GET', '/v1/usage/base/not-a-uuid', auth], // 400
      ['POST', '/v1/reload', auth],
    ]
    for (const [method, path, headers] of calls) {
      const a = await send(live.gw.adminPort, { method, path, headers })
      expect([path, a.headers['cache-control']]).toEqual([path, 'no-store'])
    }
  })
})
