import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { until } from '../helpers/until.js'
import { useInstances } from '../helpers/instances.js'

// Issue #33 (SPEC §5 "Usage over time", "Notices", credit): two instances on one redis-server.

const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10' // team acme
const B = '1b0e9c7a-7a7e-4bb0-8d2c-0c5f3d6e1a20' // team acme
const LONE = '2b0e9c7a-7a7e-4bb0-8d2c-0c5f3d6e1a21' // no team
const rows = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`
const today = () => new Date().toISOString().slice(0, 10) // the zone is UTC
const FLUSH = { BASEGATE_USAGE_FLUSH_MS: '300' }

const admin = (g: GatewayProcess, path: string, init: RequestInit = {}) =>
  fetch(`${g.adminUrl}${path}`, init)
const json = async (g: GatewayProcess, path: string) => (await admin(g, path)).json()

describe('calls per day, shared by two instances (issue #33)', () => {
  const set = useInstances({
    count: 2,
    env: FLUSH,
    // Every base kept by name (SPEC §4; others and keep_after: test/e2e/strangers.test.ts).
    yaml: (redis) => `store: { url: "${redis.url}", prefix: "${redis.prefix}days:" }
usage: { keep_after: 0 }
rate_limits: { base: 1000/min }
monthly:
  enabled: true
  plans: { small: { calls: 10 } }
  teams: [ { id: acme, plan: small, bases: ["${A}", "${B}"] } ]`,
  })

  it('adds up a team’s and a base’s calls across instances, counts a base in no team, as JSON and CSV', async () => {
    const [g1, g2] = set.gws as [GatewayProcess, GatewayProcess]
    for (let i = 0; i < 3; i++) await send(g1.port, { path: rows(A) })
    for (let i = 0; i < 2; i++) await send(g2.port, { path: rows(A) })
    await send(g2.port, { path: rows(B) })
    for (let i = 0; i < 4; i++) await send(g1.port, { path: rows(LONE) })
    // A read of an instance's usage writes what it holds first: g1's here, g2's on the next.
    await json(g1, `/v1/usage/history?base=${LONE}`)
    const team = await json(g2, '/v1/usage/history?team=acme')
    expect(team.key).toBe('team:acme')
    expect(team.from).toBe(`${today().slice(0, 7)}-01`)
    expect(team.to).toBe(today())
    expect(team.days.at(-1)).toEqual({ date: today(), calls: 6, credited: 0 })
    expect(team.days.length).toBe(Number(today().slice(8)))
    expect(team.days.slice(0, -1).every((d: { calls: number }) => d.calls === 0)).toBe(true)
    expect(team).toMatchObject({ quota: 10, used: 6 })
    const base = await json(g1, `/v1/usage/history?base=${A}&from=${today()}&to=${today()}`)
    expect(base).toMatchObject({
      key: `base:${A.replace(/-/g, '')}`,
      id: A,
      from: today(),
      to: today(),
      timezone: 'UTC',
      days: [{ date: today(), calls: 5, credited: 0 }],
      months: [],
    })
    const lone = await json(g1, `/v1/usage/history?base=${LONE}&from=${today()}&to=${today()}`)
    expect(lone.days).toEqual([{ date: today(), calls: 4, credited: 0 }])
    // CSV, by Accept or by format=csv: the export's columns, named for its subject and range.
    const csv = await admin(g1, `/v1/usage/history?team=acme&from=${today()}&to=${today()}`, {
      headers: { accept: 'text/csv' },
    })
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/)
    expect(csv.headers.get('content-disposition')).toBe(
      `attachment; filename="basegate-team-acme-${today()}_to_${today()}-UTC.csv"`
    )
    expect(await csv.text()).toBe(
      `date,kind,id,team,calls,credited\n${today()},team,acme,acme,6,0\n`
    )
    const csv2 = await (await admin(g2, `/v1/usage/history?base=${LONE}&format=csv`)).text()
    expect(csv2.split('\n')[0]).toBe('date,kind,id,team,calls,credited')
    expect(csv2.trim().split('\n').at(-1)).toBe(`${today()},base,${LONE},,4,0`)
  })

  it.each([
    ['', 400, /exactly one of team=ID or base=UUID/],
    ['?team=acme&base=' + A, 400, /exactly one/],
    ['?team=nobody', 404, /team: "nobody" is not a team/],
    ['?base=not-a-uuid', 400, /^base: "not-a-uuid" is not a base UUID/],
    ['?team=acme&from=2026-02-30', 400, /^from: "2026-02-30" is not a date/],
    ['?team=acme&to=2026-1-05', 400, /^to: "2026-1-05" is not a date/],
    ['?team=acme&from=2026-11-20&to=2026-11-10', 400, /^from: 2026-11-20 is after to: 2026-11-10/],
    ['?team=acme&from=2024-01-01&to=2025-11-10', 400, /^to: the range .* is over 400 days/],
    ['?team=acme&from=2099-01-01', 400, /^from: 2099-01-01 is after today/],
    ['?team=acme&format=xml', 400, /^format: "xml"/],
  ])('GET /v1/usage/history%s → %i naming the parameter', async (q, status, message) => {
    const r = await admin(set.gws[0]!, `/v1/usage/history${q}`)
    expect(r.status).toBe(status)
    expect((await r.json()).error_msg).toMatch(message)
  })

  it('credit lowers this month’s used count (never below 0), seen by the other instance at once, and logs it', async () => {
    const [g1, g2] = set.gws as [GatewayProcess, GatewayProcess]
    const before = (await json(g2, '/v1/teams')).teams[0].used as number
    expect(before).toBeGreaterThanOrEqual(6)
    const r = await admin(g1, '/v1/teams/acme/credit', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"calls": 4}',
    })
    expect(r.status).toBe(200)
    expect((await r.json()).used).toBe(before - 4)
    expect((await json(g2, '/v1/teams')).teams[0].used).toBe(before - 4)
    const line = await g1.waitForLog((l) => l.msg === 'monthly quota credited')
    expect(line).toMatchObject({
      team: 'acme',
      calls: 4,
      used_before: before,
      used_after: before - 4,
      level: 'info',
    })
    // Never below zero.
    const all = await admin(g2, '/v1/teams/acme/credit', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"calls": 1000}',
    })
    expect((await all.json()).used).toBe(0)
    for (const [body, status] of [
      ['{"calls": 0}', 400],
      ['{"calls": -3}', 400],
      ['{"calls": 1.5}', 400],
      ['{"calls": "4"}', 400],
      ['{"calls": 4, "why": "x"}', 400],
      ['{"calls": 4, "note": 7}', 400],
      [`{"calls": 4, "note": "${'x'.repeat(201)}"}`, 400],
      ['{"calls": 4, "note": "two\\nlines"}', 400],
      ['[4]', 400],
      ['not json', 400],
    ] as const) {
      const bad = await admin(g1, '/v1/teams/acme/credit', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      })
      expect([body, bad.status]).toEqual([body, status])
      expect((await bad.json()).error_msg).toBeTruthy()
    }
    const none = await admin(g1, '/v1/teams/nobody/credit', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"calls": 1}',
    })
    expect(none.status).toBe(404)
  })

  it('says "80% used" and "used up" once per team and month across both instances', async () => {
    const [g1, g2] = set.gws as [GatewayProcess, GatewayProcess]
    // The count is 0 after the credit: 10 calls, alternating, reach 80 % and then 100 %.
    for (let i = 0; i < 12; i++) await send((i % 2 === 0 ? g1 : g2).port, { path: rows(A) })
    // Each notice is logged as its call is decided; a later call's line on each instance says
    // every earlier line of it has arrived.
    await until(
      'the "used up" notice',
      () => [...g1.logs, ...g2.logs],
      (ls) => ls.some((l) => l.msg === 'monthly quota used up')
    )
    for (const g of [g1, g2]) {
      await send(g.port, { path: '/after-the-notices' })
      await g.waitForLog((l) => l.path === '/after-the-notices')
    }
    const lines = [...g1.logs, ...g2.logs]
    const eighty = lines.filter((l) => l.msg === 'monthly quota 80% used')
    const full = lines.filter((l) => l.msg === 'monthly quota used up')
    expect(eighty).toHaveLength(1)
    expect(full).toHaveLength(1)
    expect(eighty[0]).toMatchObject({ team: 'acme', quota: 10, level: 'warn' })
    expect(eighty[0]!.used).toBeGreaterThanOrEqual(8)
    expect(full[0]).toMatchObject({ team: 'acme', used: 10, quota: 10, level: 'warn' })
    expect(Number(full[0]!.reset)).toBeGreaterThan(Date.now() / 1000)
  })
})

describe('a killed process loses at most its last interval (issue #33)', () => {
  const set = useInstances({
    count: 1,
    env: FLUSH,
    yaml: (redis) =>
      `store: { url: "${redis.url}", prefix: "${redis.prefix}kill:" }\nusage: { keep_after: 0 }`,
  })
  let other: GatewayProcess

  beforeAll(async () => {
    // Read through a second instance that outlives the first.
    other = await startGateway(
      testYaml(
        set.up.url,
        `store: { url: "${set.redis.url}", prefix: "${set.redis.prefix}kill:" }\nusage: { keep_after: 0 }`
      ),
      { env: FLUSH }
    )
  })
  afterAll(async () => {
    await other?.stop()
  })

  it('counts written before a SIGKILL stay; only the unwritten interval is lost', async () => {
    const g = set.gws[0]!
    for (let i = 0; i < 7; i++) await send(g.port, { path: rows(LONE) })
    // The interval's write, seen through the other instance.
    await until(
      'the 300 ms write',
      async () =>
        (await json(other, `/v1/usage/history?base=${LONE}&from=${today()}&to=${today()}`)).days[0]
          .calls,
      (n) => n >= 7
    )
    await send(g.port, { path: rows(LONE) }) // in an interval that the kill cuts short
    await g.stop('SIGKILL')
    const h = await json(other, `/v1/usage/history?base=${LONE}&from=${today()}&to=${today()}`)
    expect(h.days[0].calls).toBeGreaterThanOrEqual(7)
    expect(h.days[0].calls).toBeLessThanOrEqual(8)
  })
})
