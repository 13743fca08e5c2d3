import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import { launchChromium } from '../helpers/chromium.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYamlWithToken, type GatewayProcess } from '../helpers/gateway-process.js'
import { rowsPath, send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #25 / SPEC §7: the status page in a real browser (Debian's chromium, installed by
// .ci/tools, driven by playwright-core): it draws what /v1/status says.

const TOKEN = 'status-page-token-0123456789'
const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const B = '1b0e9c7a-7a7e-4bb0-8d2c-0c5f3d6e1a20'
const C = '2b0e9c7a-7a7e-4bb0-8d2c-0c5f3d6e1a21'

describe('the status page in Chromium', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  let browser: Browser
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(
      testYamlWithToken(
        up.url,
        TOKEN,
        `server: { version: "5.2" }
rate_limits: { base: 30/min }
protect: { max_in_flight: 16 }
monthly:
  enabled: true
  plans: { small: { calls: 10 }, tiny: { calls: 4 } }
  teams:
    - { id: calm, plan: small, bases: ["${A}"] }
    - { id: busy, plan: small, bases: ["${B}"] }
    - { id: over, plan: small, bases: ["${C}"] }`
      ),
      { env: { BASEGATE_USAGE_FLUSH_MS: '200' } }
    )
    browser = await launchChromium()
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
    await up?.close()
  })

  const auth = { authorization: `Bearer ${TOKEN}` }
  const status = async () =>
    JSON.parse((await send(gw.adminPort, { path: '/v1/status', headers: auth })).body)

  it('asks for the token (Basic or Bearer), then draws the chart, team bars and busiest keys of /v1/status', async () => {
    expect((await send(gw.adminPort, { path: '/' })).status).toBe(401)
    const wrong = Buffer.from('admin:nope').toString('base64')
    expect(
      (await send(gw.adminPort, { path: '/', headers: { authorization: `Basic ${wrong}` } })).status
    ).toBe(401)

    // Traffic: 2 calls on A (20 %), 9 on B (90 %: amber), 6 on C then its plan cut to 4 (150 %: red).
    for (let i = 0; i < 2; i++) await send(gw.port, { path: rowsPath(A) })
    for (let i = 0; i < 9; i++) await send(gw.port, { path: rowsPath(B) })
    for (let i = 0; i < 6; i++) await send(gw.port, { path: rowsPath(C) })
    const cut = await send(gw.adminPort, {
      method: 'PUT',
      path: '/v1/teams/over',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'tiny' }),
    })
    expect(cut.status).toBe(200)
    // More traffic runs while the page loads: refusals (C is over its month) and web-UI calls.
    let running = true
    const traffic = (async () => {
      while (running) {
        await send(gw.port, { path: rowsPath(C) })
        await send(gw.port, { path: '/workspace/1/' })
        await new Promise((r) => setTimeout(r, 50))
      }
    })()

    const context = await browser.newContext({
      httpCredentials: { username: 'admin', password: TOKEN },
    })
    const page = await context.newPage()
    const answer = await page.goto(`http://127.0.0.1:${gw.adminPort}/`)
    expect(answer!.status()).toBe(200)
    await page.waitForSelector('body[data-loaded]')
    running = false
    await traffic
    // The next refresh (every 5 s) draws the counts as they now stand.
    const drawn = Number(await page.getAttribute('body', 'data-loaded'))
    await page.waitForFunction((t) => Number(document.body.dataset.loaded) > t, drawn, {
      timeout: 8_000,
    })
    const s = await status()

    // The chart: one line per series, its total the JSON's.
    const lines = await page.$$eval('#chart polyline', (ls) =>
      ls.map((l) => [l.getAttribute('data-series'), Number(l.getAttribute('data-total'))])
    )
    const expected = Object.entries(s.traffic.series as Record<string, number[]>).map(([n, v]) => [
      n,
      v.reduce((a, b) => a + b, 0),
    ])
    expect(Object.fromEntries(lines)).toEqual(Object.fromEntries(expected))
    expect(Object.keys(s.traffic.series)).toEqual(
      expect.arrayContaining(['base/forwarded', 'base/monthly_limited', 'other/forwarded'])
    )

    // The busiest keys, in order, with their calls.
    const busiest = await page.$$eval('#busiest tbody tr', (rows) =>
      rows.map((r) => ({
        key: r.getAttribute('data-key'),
        calls: Number(r.getAttribute('data-calls')),
      }))
    )
    // (The JSON's entries also name the key's team and override: issue #34.)
    expect(busiest).toEqual(
      s.busiest.map((b: { key: string; calls: number }) => ({ key: b.key, calls: b.calls }))
    )
    expect(busiest[0]!.key).toBe(`base:${C.replace(/-/g, '')}`)

    // The team bars: the numbers, and the colour past 80 % and past 100 %.
    const teams = await page.$$eval('.team', (ts) =>
      ts.map((t) => ({
        id: t.getAttribute('data-team'),
        used: Number(t.getAttribute('data-used')),
        quota: Number(t.getAttribute('data-quota')),
        bar: t.querySelector('.bar')!.className,
      }))
    )
    expect(teams.map(({ id, used, quota }) => ({ id, used, quota }))).toEqual(
      s.teams.map((t: { id: string; used: number; quota: number }) => ({
        id: t.id,
        used: t.used,
        quota: t.quota,
      }))
    )
    const bar = Object.fromEntries(teams.map((t) => [t.id, t.bar]))
    expect(bar).toEqual({ calm: 'bar', busy: 'bar amber', over: 'bar red' })

    // Issue #33: each team's days of this month beside its bar, today's bar its calls today,
    // and the quota's even pace as a line.
    const dom = new Date().getUTCDate()
    const days = await page.$$eval('.team[data-team="busy"] svg.days rect', (rs) =>
      rs.map((r) => r.querySelector('title')?.textContent ?? '')
    )
    expect(days).toHaveLength(dom)
    expect(days.at(-1)).toBe(`${new Date().toISOString().slice(0, 10)}: 9 calls`)
    expect(await page.$$('.team[data-team="busy"] svg.days line.pace')).toHaveLength(1)
    // Issue #40: the pace is the last 7 full days' and (issue #49) today's part: the calls are
    // all today's, and the pace is not 0 (whether it runs out before the month ends depends on
    // the hour and the day of the month the test runs).
    const runsOut = (await page.getAttribute(
      '.team[data-team="busy"] .pace-text',
      'data-runs-out'
    ))!
    const paceText = (await page.textContent('.team[data-team="busy"] .pace-text'))!
    const m =
      /^on pace for (\d+)(?: this month)? \(([\d.]+) a day over the last 7 days and today\)(?:: runs out around (\S+))?$/.exec(
        paceText
      )
    expect(m, paceText).not.toBeNull()
    expect(Number(m![2])).toBeGreaterThan(0)
    expect(Number(m![1])).toBeGreaterThanOrEqual(9)
    expect(m![3] ?? '').toBe(runsOut)
    if (runsOut !== '') expect(runsOut >= new Date().toISOString().slice(0, 10)).toBe(true)
    // Issue #41: its dates and numbers without hovering; issue #40: its days as a CSV.
    expect(await page.textContent('.team[data-team="busy"] .days-text')).toMatch(
      /^today 9 · busiest 9 on /
    )
    expect(
      await page.$$eval('.team[data-team="busy"] svg.days text.date', (ts) => ts.length)
    ).toBeGreaterThanOrEqual(1)
    expect(await page.getAttribute('.team[data-team="busy"] a', 'href')).toBe(
      '/v1/usage/history?team=busy&format=csv'
    )

    // A base's history on request.
    await page.fill('#history-base', B)
    await page.click('#history-form button')
    await page.waitForSelector('#history [data-history]')
    expect(await page.getAttribute('#history [data-history]', 'data-total')).toBe('9')
    expect(await page.$$('#history svg.days rect')).toHaveLength(dom)

    // SPEC §11: the limit in force beside each key's busiest minute (B's 9 calls, C's more).
    const limitRow = '#limits tr[data-limit-id="class:base"]'
    await page.waitForSelector(limitRow, { timeout: 12_000 })
    const lim = await page.$eval(limitRow, (r) => ({
      perMinute: Number(r.getAttribute('data-per-minute')),
      p99: Number(r.getAttribute('data-p99')),
      max: Number(r.getAttribute('data-max')),
      text: r.textContent,
    }))
    expect(lim.perMinute).toBe(30)
    expect(lim.max).toBeGreaterThanOrEqual(9)
    expect(lim.p99).toBeLessThanOrEqual(lim.max)
    expect(lim.text).toContain('30/min')
    expect(await page.$$(`${limitRow} svg.use line.limit`)).toHaveLength(1)
    expect(s.tuning === null || Array.isArray(s.tuning.limits)).toBe(true)

    // The protection, the server with the next release's report, the masked configuration.
    expect(await page.getAttribute('#protect tr[data-ceiling]', 'data-ceiling')).toBe('16')
    expect(s.server).toMatchObject({ version: '5.2', next: '5.3' })
    expect(await page.textContent('#report')).toContain('Upgrade to 5.3')
    const config = await page.textContent('#config')
    expect(config).toContain('"token": "****"')
    expect(config).not.toContain(TOKEN)

    const dir = mkdtempSync(join(tmpdir(), 'bg-status-page-'))
    const file = join(dir, 'status-page.png')
    await page.setViewportSize({ width: 1280, height: 1000 })
    await page.screenshot({ path: file, fullPage: true })
    if (process.env.STATUS_SCREENSHOT)
      await page.screenshot({ path: process.env.STATUS_SCREENSHOT, fullPage: true })
    process.stderr.write(`status page screenshot: ${file}\n`)
    await context.close()
  }, 60_000)
})
