import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { startLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { until } from '../../helpers/until.js'
import { startRedis, type TestRedis } from '../../helpers/redis.js'
import { startStubUpstream, type StubUpstream } from '../../helpers/stub-upstream.js'

// Issue #40 (SPEC §5 "One ledger: the numbers reconcile"): two instances on one redis-server
// that persists every write; traffic through both while Redis is frozen (DEBUG SLEEP), paused
// (CLIENT PAUSE) and killed and restarted. Afterwards each admitted call is in the days exactly
// once, and used = Σ days − Σ credits on both instances; a used-up team stayed refused.

const ACME = ['6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10', '1b0e9c7a-7a7e-4bb0-8d2c-0c5f3d6e1a20']
const GLOBEX = '2b0e9c7a-7a7e-4bb0-8d2c-0c5f3d6e1a21'
const rows = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`
const today = () => new Date().toISOString().slice(0, 10)
const sum = (xs: { calls: number }[]) => xs.reduce((a, d) => a + d.calls, 0)

describe('one ledger through store faults (issue #40)', () => {
  let redis: TestRedis
  let up: StubUpstream
  const gws: Gateway[] = []
  const ok = new Map<string, number>()
  let globexServedInOutage = 0
  beforeAll(async () => {
    redis = await startRedis({ own: true, persist: true })
    up = await startStubUpstream()
    const yaml = testYaml(
      up.url,
      `store: { url: "${redis.url}", prefix: "${redis.prefix}", timeout_ms: 100, on_error: open }
rate_limits: { base: 100000/min, account: 100000/min }
monthly:
  enabled: true
  plans: { big: { calls: 100000 }, tiny: { calls: 5 } }
  teams:
    - { id: acme, plan: big, bases: ["${ACME[0]}", "${ACME[1]}"] }
    - { id: globex, plan: tiny, bases: ["${GLOBEX}"] }`
    )
    for (let i = 0; i < 2; i++)
      gws.push(
        await startLive(yaml, { env: { BASEGATE_USAGE_FLUSH_MS: '300', LOG_LEVEL: 'info' } })
      )
  }, 60_000)
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()))
    await up?.close()
    await redis?.stop()
  })

  /** Calls through both instances until `stop`; counts every 200 by base. */
  async function traffic(stop: { done: boolean }, outage: { on: boolean }): Promise<void> {
    let i = 0
    while (!stop.done) {
      const u = i % 7 === 6 ? GLOBEX : ACME[i % 2]!
      const r = await send(gws[i % 2]!.port, { path: rows(u) }).catch(() => null)
      if (r?.status === 200) {
        ok.set(u, (ok.get(u) ?? 0) + 1)
        if (u === GLOBEX && outage.on) globexServedInOutage++
      }
      i++
    }
  }

  it('each admitted call is in the days once, and used = Σ days − Σ credits, on both instances', async () => {
    // globex uses itself up while the store answers.
    for (let i = 0; i < 5; i++)
      expect((await send(gws[0]!.port, { path: rows(GLOBEX) })).status).toBe(200)
    expect((await send(gws[1]!.port, { path: rows(GLOBEX) })).status).toBe(429)
    ok.set(GLOBEX, 5)
    const stop = { done: false }
    const outage = { on: false }
    const running = traffic(stop, outage)
    const admin = new Redis(redis.url, { maxRetriesPerRequest: 0 })
    admin.on('error', () => {})
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))
    await pause(800)
    // A freeze: the commands queued meanwhile run when it wakes (past their deadlines).
    outage.on = true
    await admin.call('DEBUG', 'SLEEP', '2').catch(() => {})
    outage.on = false
    await pause(800)
    outage.on = true
    await admin.call('CLIENT', 'PAUSE', '1500', 'ALL')
    await pause(1600)
    outage.on = false
    await pause(800)
    // Killed, and back 1.5 s later with what it had written.
    outage.on = true
    await redis.kill()
    await pause(1500)
    await redis.restart()
    await pause(1500)
    outage.on = false
    await pause(800)
    stop.done = true
    await running
    admin.disconnect()
    // Written within the flush interval (300 ms) once the store answers; give both a moment.
    await pause(2500)

    // The faults were met: the instances decided alone for a while (their fallback).
    let fallback = 0
    for (const g of gws) {
      const m = /^basegate_store_fallback_decisions_total (\d+)/m.exec(
        await (await fetch(`${g.adminUrl}/metrics`)).text()
      )
      fallback += Number(m?.[1] ?? 0)
    }
    expect(fallback).toBeGreaterThan(0)
    expect(globexServedInOutage).toBe(0)
    const acmeOk = (ok.get(ACME[0]!) ?? 0) + (ok.get(ACME[1]!) ?? 0)
    expect(acmeOk).toBeGreaterThan(100)
    for (const g of gws) {
      const h = await (
        await fetch(`${g.adminUrl}/v1/usage/history?team=acme&from=${today()}`)
      ).json()
      expect(sum(h.days)).toBe(acmeOk)
      expect(h.used).toBe(acmeOk) // no credits yet
      const teams = await (await fetch(`${g.adminUrl}/v1/teams`)).json()
      expect(teams.teams.find((t: { id: string }) => t.id === 'acme').used).toBe(acmeOk)
      for (const u of ACME) {
        const b = await (
          await fetch(`${g.adminUrl}/v1/usage/history?base=${u}&from=${today()}`)
        ).json()
        expect(b.days.at(-1).calls).toBe(ok.get(u) ?? 0)
      }
      const gx = await (
        await fetch(`${g.adminUrl}/v1/usage/history?team=globex&from=${today()}`)
      ).json()
      expect(sum(gx.days)).toBe(5)
    }
    // The trouble was said once a minute per kind, with the store and the socket's error, no stack.
    const trouble = gws
      .flatMap((g) => g.logs)
      .filter((l) => String(l.msg).includes('could not be written'))
    for (const l of trouble) {
      expect(String(l.store)).toBe(redis.url)
      expect(l.stack ?? l.err).toBeUndefined()
    }
    const backLines = gws
      .flatMap((g) => g.logs)
      .filter((l) => String(l.msg).includes('the store answers again after'))
    for (const l of backLines) expect(Number(l.away_s)).toBeGreaterThan(0)
  }, 60_000)

  it('a credit with a note is an entry: listed, in the history’s day, used still Σ days − Σ credits; used up again, the notice is said again', async () => {
    const [g1, g2] = gws as [Gateway, Gateway]
    const post = (g: Gateway, body: string) =>
      fetch(`${g.adminUrl}/v1/teams/globex/credit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      })
    const c = await post(g1, '{"calls": 3, "note": "outage on the 26th"}')
    expect(c.status).toBe(200)
    const answer = await c.json()
    expect(answer.used).toBe(2)
    expect(answer.credit).toMatchObject({
      calls: 3,
      asked: 3,
      note: 'outage on the 26th',
      used_before: 5,
      used_after: 2,
    })
    const list = await (await fetch(`${g2.adminUrl}/v1/teams/globex/credits`)).json()
    expect(list.credits).toEqual([
      expect.objectContaining({ calls: 3, note: 'outage on the 26th' }),
    ])
    const h = await (
      await fetch(`${g2.adminUrl}/v1/usage/history?team=globex&from=${today()}`)
    ).json()
    expect(h.days.at(-1)).toEqual({ date: today(), calls: 5, credited: 3 })
    const month = h.months.at(-1)
    expect(month).toMatchObject({ quota: 5, used: 2, credited: 3, remaining: 3 })
    expect(month.used).toBe(sum(h.days) - month.credited)
    // Used up again: the second "used up" of the month.
    for (let i = 0; i < 3; i++)
      expect((await send(g2.port, { path: rows(GLOBEX) })).status).toBe(200)
    expect((await send(g1.port, { path: rows(GLOBEX) })).status).toBe(429)
    const usedUp = () =>
      gws
        .flatMap((g) => g.logs)
        .filter((l) => l.msg === 'monthly quota used up' && l.team === 'globex')
    await until('the second "used up"', usedUp, (ls) => ls.length >= 2)
    // Each notice is logged as its call is decided; a later call's line on each instance says
    // every earlier line of it has arrived.
    for (const g of gws) {
      await send(g.port, { path: '/after-the-notices' })
      await g.waitForLog((l) => l.path === '/after-the-notices')
    }
    expect(usedUp()).toHaveLength(2)
  })

  it('the export: every team and base of the range in one answer, by Basic login as a browser opens it; to=9999-12-31 is today', async () => {
    const g = gws[0]!
    const started = performance.now()
    const far = await fetch(`${g.adminUrl}/v1/usage/history?team=acme&to=9999-12-31`)
    expect(performance.now() - started).toBeLessThan(2000)
    expect((await far.json()).to).toBe(today())
    const csv = await fetch(`${g.adminUrl}/v1/usage/export?from=${today()}&format=csv`, {
      headers: { 'sec-fetch-mode': 'navigate', accept: 'text/html,*/*' },
    })
    expect(csv.status).toBe(200)
    expect(csv.headers.get('content-disposition')).toMatch(/^attachment; filename="basegate-usage-/)
    const lines = (await csv.text()).trim().split('\n')
    expect(lines[0]).toBe('date,kind,id,team,calls,credited')
    expect(lines).toContain(`${today()},team,globex,globex,8,3`)
    expect(lines.filter((l) => l.includes(',base,'))).toHaveLength(3)
    expect(lines).toContain(`${today()},base,${ACME[0]},acme,${ok.get(ACME[0]!)},0`)
  })
})
