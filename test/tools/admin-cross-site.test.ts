import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Browser } from 'playwright-core'
import { launchChromium } from '../helpers/chromium.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYamlWithToken, type GatewayProcess } from '../helpers/gateway-process.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #31 item 5 (SPEC §7) in a real browser: Chromium holds a Basic login to the admin
// listener (the status page was opened with the token), then a page of another origin tries to
// reload the gateway and to change a team: by a form it submits, and by fetch(). Every one is
// refused 403 and nothing changes; the status page itself still works.

const TOKEN = 'cross-site-browser-token-0123'
const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

/** A page of another origin (another port of the loopback: Chromium calls it same-site). */
function evilPage(adminPort: number): Promise<Server> {
  const admin = `http://127.0.0.1:${adminPort}`
  const html = `<!doctype html><html><body>
<form id="f" method="POST" action="${admin}/v1/reload"></form>
<script>
  window.fetched = Promise.all([
    fetch('${admin}/v1/reload', { method: 'POST', mode: 'no-cors', credentials: 'include' }).then(() => 'sent', (e) => String(e)),
    // A PUT is not a simple request: the browser asks first (OPTIONS), gets no CORS grant, and never sends it.
    fetch('${admin}/v1/teams/acme', { method: 'PUT', mode: 'cors', credentials: 'include', headers: { 'content-type': 'application/json' }, body: '{"users":500}' }).then(() => 'sent', () => 'blocked'),
  ])
</script></body></html>`
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' })
    res.end(html)
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

describe('cross-site admin calls from a real Chromium page (issue #31 item 5)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  let browser: Browser
  let evil: Server
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(
      testYamlWithToken(
        up.url,
        TOKEN,
        `monthly: { enabled: true, plans: { p: { calls: 100 } }, teams: [ { id: acme, plan: p, bases: ["${U}"] } ] }`
      )
    )
    evil = await evilPage(gw.adminPort)
    browser = await launchChromium()
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    await new Promise((r) => evil?.close(r))
    await gw?.stop()
    await up?.close()
  })

  it('a form and fetch() from another origin with a cached Basic login get 403; nothing reloads, the team stays', async () => {
    // The browser holds the login, as after the operator opened the status page.
    const context = await browser.newContext({
      httpCredentials: { username: 'admin', password: TOKEN },
    })
    const page = await context.newPage()
    const statuses: { url: string; method: string; status: number }[] = []
    page.on('response', (r) => {
      statuses.push({ url: r.url(), method: r.request().method(), status: r.status() })
    })
    const own = await page.goto(`http://127.0.0.1:${gw.adminPort}/`)
    expect(own?.status()).toBe(200)

    const reloadsBefore = gw.logs.filter((l) => l.msg === 'configuration reloaded').length
    const port = (evil.address() as AddressInfo).port
    await page.goto(`http://127.0.0.1:${port}/`)
    expect(
      await page.evaluate(() => (window as unknown as { fetched: Promise<string[]> }).fetched)
    ).toEqual(['sent', 'blocked'])
    const [nav] = await Promise.all([
      page.waitForResponse(
        (r) => r.request().resourceType() === 'document' && r.request().method() === 'POST'
      ),
      page.evaluate(() => (document.getElementById('f') as HTMLFormElement).submit()),
    ])
    expect(nav.status()).toBe(403)
    await page.waitForLoadState()
    expect(await page.textContent('body')).toContain('refused from another site')

    // The PUT never left the browser (its preflight got no grant); both POSTs were refused.
    const changing = statuses.filter(
      (s) => (s.method === 'POST' || s.method === 'PUT') && s.url.includes(`:${gw.adminPort}/`)
    )
    expect(changing.map((s) => [s.method, s.status])).toEqual([
      ['POST', 403],
      ['POST', 403],
    ])
    expect(gw.logs.filter((l) => l.msg === 'configuration reloaded').length).toBe(reloadsBefore)
    const teams = (await (
      await fetch(`http://127.0.0.1:${gw.adminPort}/v1/teams`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      })
    ).json()) as { teams: { users: number; changed: boolean }[] }
    expect(teams.teams[0]).toMatchObject({ users: 1, changed: false })
    await context.close()
  })
})
