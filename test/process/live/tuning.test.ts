import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runOnce, testYaml, writeConfig, type Gateway } from '../../helpers/gateway-process.js'
import { startLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { startRedis, type TestRedis } from '../../helpers/redis.js'
import { startStubUpstream, type StubUpstream } from '../../helpers/stub-upstream.js'

// SPEC §11 where an operator meets it: POST /v1/tuning on the admin API, and
// `basegate tune-report` on a terminal (from the running instance, and from the shared store
// when none answers). The estimate's accuracy is test/tuning/accuracy.test.ts's.

const A = '0a000000-0d3b-4c59-9a51-3e2d7c8b9a10'
const B = '0b000000-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`

let up: StubUpstream
let redis: TestRedis
let gw: Gateway
let limits: string

/** A file like the running one, its admin listener the running instance's, other limits. */
const fileWith = (rate: string, extra = '') =>
  writeConfig(
    testYaml(
      up.url,
      `store: { url: "${redis.url}", prefix: "${redis.prefix}tune:" }\nrate_limits: { base: ${rate} }\nusage: { keep_after: 0 }\n${extra}`
    ).replace(/^admin: .*$/m, `admin: { host: 127.0.0.1, port: ${gw.adminPort} }`)
  )

beforeAll(async () => {
  up = await startStubUpstream()
  redis = await startRedis()
  // Every key kept by name (SPEC §4: B's 4 calls would count in others): the per-key figures are the point.
  limits = `store: { url: "${redis.url}", prefix: "${redis.prefix}tune:" }\nusage: { keep_after: 0 }\nrate_limits: { base: 100/min }\nmonthly: { enabled: true, plans: { p: { calls: 1000000 } }, teams: [ { id: acme, plan: p, bases: ["${A}"] } ] }`
  gw = await startLive(testYaml(up.url, limits), { env: { BASEGATE_USAGE_FLUSH_MS: '300' } })
  // A's 30 calls in a burst, B's 4: a limit of 5/min bites A, not B. The burst inside one minute
  // of the clock (the busiest minute is counted per clock minute; one run read 29 across a turn).
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 5_000) await new Promise((r) => setTimeout(r, left + 50))
  await Promise.all(Array.from({ length: 30 }, () => send(gw.port, { path: rows(A) })))
  for (let i = 0; i < 4; i++) await send(gw.port, { path: rows(B) })
}, 60_000)
afterAll(async () => {
  await gw?.stop()
  await up?.close()
  await redis?.stop()
})

const tune = async (body: string, query = '') =>
  fetch(`${gw.adminUrl}/v1/tuning${query}`, { method: 'POST', body })

describe('POST /v1/tuning (SPEC §11)', () => {
  it('judges a candidate on the calls seen: the window that differs, its keys with their teams, an interval', async () => {
    const candidate = testYaml(up.url, limits.replace('base: 100/min', 'base: 5/min'))
    const r = await tune(candidate)
    expect(r.status).toBe(200)
    const report = await r.json()
    expect(report.days).toBe(7)
    const s = report.sections.find((x: { id: string }) => x.id === 'class:base')
    expect(s).toMatchObject({ running: '100/min', candidate: '5/min', keys: 2, calls: 34 })
    expect(s.running_refused).toEqual({ lo: 0, hi: 0 })
    // A's burst: 25 over 5/min, within the same 5-second bins.
    expect(s.candidate_refused.lo).toBeGreaterThanOrEqual(20)
    expect(s.candidate_refused.hi).toBeLessThanOrEqual(25)
    expect(s.more_refused[0]).toMatchObject({
      key: `base:${A}`,
      team: 'acme',
      calls: 30,
    })
    const sug = report.suggestions.find((x: { id: string }) => x.id === 'class:base')
    expect(sug.busiest_minute.max).toBe(30)
  })

  it('a candidate that fails check gets its problems (400), a bad days its name, an empty body a sentence', async () => {
    const bad = await tune(testYaml(up.url, 'rate_limits: { base: 5/mn }'))
    expect(bad.status).toBe(400)
    const j = await bad.json()
    expect(j.problems.join('\n')).toMatch(/rate_limits\.base: "5\/mn" is not a rate/)
    const days = await tune(testYaml(up.url, limits), '?days=36')
    expect(days.status).toBe(400)
    expect((await days.json()).error_msg).toMatch(/^days: "36" is not a number of days \(1 to 35\)/)
    const empty = await tune('')
    expect(empty.status).toBe(400)
  })
})

describe('basegate tune-report (SPEC §11)', () => {
  it('prints the report as tables from the running instance', async () => {
    const r = await runOnce([
      'tune-report',
      '--config',
      fileWith('5/min'),
      '--running',
      fileWith('100/min'),
    ])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(
      /^Tuning report: the calls of \d{4}-\d\d-\d\d to \d{4}-\d\d-\d\d \(7 days, UTC\)/
    )
    expect(r.stdout).toContain('class:base: 100/min → 5/min')
    expect(r.stdout).toMatch(/the candidate would have refused (between \d+ and \d+|\d+)/)
    expect(r.stdout).toContain(`base ${A}`)
    expect(r.stdout).toMatch(/Suggested limits/)
  })

  it('--json gives the report as the admin API does; --days is checked', async () => {
    const r = await runOnce([
      'tune-report',
      '--config',
      fileWith('5/min'),
      '--running',
      fileWith('100/min'),
      '--json',
      '--days',
      '2',
    ])
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout).days).toBe(2)
    const bad = await runOnce(['tune-report', '--config', fileWith('5/min'), '--days', 'x'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/--days: "x" is not a number of days/)
  })

  it('a candidate that fails check: exit 2 with its problems, nothing asked', async () => {
    const r = await runOnce(['tune-report', '--config', writeConfig('rate_limits: { base: 5/mn }')])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('rate_limits.base: "5/mn" is not a rate')
  })

  it('with no instance answering, the shared store is read with the running file', async () => {
    const candidate = fileWith('5/min')
    const running = fileWith('100/min')
    await gw.stop()
    const r = await runOnce(['tune-report', '--config', candidate, '--running', running, '--json'])
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout)
    expect(report.sections[0]).toMatchObject({ id: 'class:base', keys: 2, calls: 34 })
  })
})
