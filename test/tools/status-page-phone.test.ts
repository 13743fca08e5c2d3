import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { launchChromium } from '../helpers/chromium.js'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { rowsPath, send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #41 item 5, in Chromium at 390 px (a phone) and 1,400 px: the chart's labels are drawn
// at their font's size (no squashed text), the busiest keys are whole, the team's days carry
// their dates and numbers, and nothing is wider than the screen.

const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

describe('the status page on a phone (issue #41)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  let browser: Browser
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(
      testYaml(
        up.url,
        `rate_limits: { base: 20/min }
monthly:
  enabled: true
  plans: { small: { calls: 100 } }
  teams: [ { id: acme, plan: small, bases: ["${A}"] } ]`
      )
    )
    for (let i = 0; i < 25; i++) await send(gw.port, { path: rowsPath(A) })
    for (let i = 0; i < 5; i++) await send(gw.port, { path: '/api/v2.1/user/' })
    browser = await launchChromium()
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
    await up?.close()
  })

  it.each([390, 1400])(
    'at %i px: labels at their font size, keys whole, nothing wider than the screen',
    async (width) => {
      const page = await browser.newPage({ viewport: { width, height: 900 } })
      await page.goto(`http://127.0.0.1:${gw.adminPort}/`)
      await page.waitForSelector('body[data-loaded]')
      // No squash: the chart's scale is 1 both ways, and each label is as tall as its font.
      const scale = await page.$eval('#chart', (svg) => {
        const m = (svg as SVGSVGElement).getScreenCTM()!
        return [m.a, m.d]
      })
      expect(scale[0]).toBeCloseTo(1, 2)
      expect(scale[1]).toBeCloseTo(1, 2)
      const labels = await page.$$eval('#chart text, svg.days text', (ts) =>
        ts.map((t) => {
          const r = t.getBoundingClientRect()
          return {
            text: t.textContent,
            height: r.height,
            width: r.width,
            right: r.right,
            left: r.left,
          }
        })
      )
      expect(labels.length).toBeGreaterThan(6)
      for (const l of labels) {
        expect(l.height, JSON.stringify(l)).toBeGreaterThanOrEqual(9)
        expect(l.width, JSON.stringify(l)).toBeGreaterThanOrEqual(l.text!.length * 4)
        expect(l.left).toBeGreaterThanOrEqual(0)
        expect(l.right).toBeLessThanOrEqual(width)
      }
      // y ticks, not only the maximum.
      expect(await page.$$eval('#chart text.ytick', (ts) => ts.length)).toBeGreaterThanOrEqual(3)
      // The busiest key whole: its hyphenated UUID and team, nothing clipped.
      const key = await page.$eval(
        `#busiest tr[data-key="base:${A.replace(/-/g, '')}"] td.key`,
        (td) => ({
          text: td.textContent,
          clipped: td.scrollWidth > td.clientWidth,
        })
      )
      expect(key).toEqual({ text: `base ${A}team acme`, clipped: false })
      // The team's days: dates and numbers without hovering.
      expect(await page.textContent('.team[data-team="acme"] .days-text')).toMatch(
        /^today 20 · busiest 20 on /
      )
      // Nothing wider than the screen (the base history's input included).
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(
        width
      )
      const input = (await page.locator('#history-base').boundingBox())!
      expect(input.x + input.width).toBeLessThanOrEqual(width)
      const dir = mkdtempSync(join(tmpdir(), 'bg-status-phone-'))
      await page.screenshot({ path: join(dir, `status-${width}.png`), fullPage: true })
      if (process.env.STATUS_SCREENSHOT_DIR)
        await page.screenshot({
          path: join(process.env.STATUS_SCREENSHOT_DIR, `status-page-${width}.png`),
          fullPage: true,
        })
      await page.close()
    }
  )
})
