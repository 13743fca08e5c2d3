import { writeFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { monthBounds } from '../../../src/quota/month.js'
import { testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { send } from '../../helpers/http.js'
import { startLive } from '../../helpers/live.js'
import { startRedis, type TestRedis } from '../../helpers/redis.js'
import { startStubUpstream, type StubUpstream } from '../../helpers/stub-upstream.js'

// Monthly quotas and the admin API across two instances on one Redis, served in the test's
// process (issue #48); what needs a process of its own (the check at start, the file watch,
// the summary timer) is in test/e2e/admin-monthly.test.ts.

const TOKEN = 'admin-tok-7f3a9'
const ACME = 'aaaa0000-0d3b-4c59-9a51-3e2d7c8b9a10'
const SOLO = 'bbbb0000-0d3b-4c59-9a51-3e2d7c8b9a10'
const LONE = 'cccc0000-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`
const auth = { authorization: `Bearer ${TOKEN}` }

let redis: TestRedis
let up: StubUpstream
let a: Gateway
let b: Gateway

function yaml(extraTeams = '') {
  return testYaml(
    up.url,
    `admin: { host: 127.0.0.1, port: 0, token: "${TOKEN}" }
store: { url: "redis://:@127.0.0.1:${redis.port}", prefix: "${redis.prefix}" }
rate_limits: { base: 200/min, account: 1000/min }
monthly:
  enabled: true
  timezone: UTC
  plans:
    tiny: { calls: 4 }
  teams:
    - { id: acme, plan: tiny, users: 3, bases: [${ACME}] }
    - { id: solo, plan: plus, users: 1, bases: [${SOLO}] }
${extraTeams}`
  ).replace(/^admin:.*\n/m, '')
}

async function admin(
  g: Gateway,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = auth
) {
  const r = await send(g.adminPort, {
    method,
    path,
    headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  const isJson = String(r.headers['content-type'] ?? '').includes('json')
  return {
    status: r.status,
    json: isJson && r.body ? JSON.parse(r.body) : null,
    headers: r.headers,
    text: r.body,
  }
}

beforeAll(async () => {
  redis = await startRedis()
  up = await startStubUpstream()
  a = await startLive(yaml())
  b = await startLive(yaml())
})
afterAll(async () => {
  await a?.stop()
  await b?.stop()
  await up?.close()
  await redis?.stop()
})

describe('monthly quotas (SPEC §5)', () => {
  it('a used-up quota answers the monthly 429 on every instance, with the month in the headers', async () => {
    const statuses: number[] = []
    for (let i = 0; i < 4; i++)
      statuses.push((await send(i % 2 ? a.port : b.port, { path: rows(ACME) })).status)
    expect(statuses).toEqual([200, 200, 200, 200])
    const sent = Date.now()
    const refused = await send(a.port, { path: rows(ACME) })
    const answered = Date.now()
    const other = await send(b.port, { path: `/api/v2.1/dtables/${ACME}/` }) // account calls count too
    expect(refused.status).toBe(429)
    expect(other.status).toBe(429)
    expect(refused.body).toBe('')
    const month = monthBounds(Date.now(), 'UTC')
    expect(Number(refused.headers['x-ratelimit-reset'])).toBe(month.endMs / 1000)
    expect(refused.headers['x-ratelimit-remaining']).toBe('0')
    expect(refused.headers['x-ratelimit-limit']).toBe('200') // still the minute limit
    const retry = Number(refused.headers['retry-after'])
    // The seconds to the month's end from the moment the store decided: between the call's
    // sending and its answer (the store's clock is this machine's), however long it took.
    expect(retry).toBeGreaterThanOrEqual(Math.ceil((month.endMs - answered) / 1000))
    expect(retry).toBeLessThanOrEqual(Math.ceil((month.endMs - sent) / 1000))
    // The warn line says why, with the team's usage.
    const line = await a.waitForLog((l) => l.status === 429 && l.team === 'acme')
    expect(line).toMatchObject({
      level: 'warn',
      msg: 'refused: monthly quota used up',
      used: 4,
      quota: 4,
    })
  })

  it('the quota stays hidden from the headers while it lasts, and shows in the log line', async () => {
    const r = await send(a.port, { path: rows(SOLO) })
    expect(r.headers['x-ratelimit-limit']).toBe('200')
    const line = await a.waitForLog((l) => l.team === 'solo' && l.status === 200)
    expect(line).toMatchObject({ team: 'solo', quota: 10000 })
    expect(line.used).toEqual(expect.any(Number))
  })

  it('a call refused by a size limit still counts against the monthly quota (SPEC §4)', async () => {
    const before = (await admin(a, 'GET', `/v1/usage/base/${SOLO}`)).json.monthly.used as number
    const r = await send(a.port, { path: rows(SOLO) + '?table_name=T&limit=5000' })
    expect(r.status).toBe(400)
    const after = (await admin(a, 'GET', `/v1/usage/base/${SOLO}`)).json.monthly.used as number
    expect(after).toBe(before + 1)
  })

  it('bases in no team are not charged', async () => {
    await send(a.port, { path: rows(LONE) })
    const line = await a.waitForLog((l) => l.path === rows(LONE))
    expect(line.team).toBeUndefined()
  })

  it('PUT raises the quota at once on another instance, keeping what was used; DELETE drops the change', async () => {
    expect((await send(b.port, { path: rows(ACME) })).status).toBe(429)
    const put = await admin(a, 'PUT', '/v1/teams/acme', { plan: 'plus' })
    expect(put.status).toBe(200)
    expect(put.json).toMatchObject({
      id: 'acme',
      plan: 'plus',
      users: 3,
      quota: 30000,
      changed: true,
    })
    expect(put.json.used).toBeGreaterThanOrEqual(4)
    // No waiting: the very next call on the other instance is admitted.
    const next = await send(b.port, { path: rows(ACME) })
    expect(next.status).toBe(200)
    const teams = await admin(b, 'GET', '/v1/teams')
    const acme = teams.json.teams.find((t: { id: string }) => t.id === 'acme')
    expect(acme).toMatchObject({
      plan: 'plus',
      quota: 30000,
      changed: true,
      bases: [ACME], // hyphenated, as clients send it (SPEC §7)
    })
    expect(acme.used).toBe(5)

    const del = await admin(b, 'DELETE', '/v1/teams/acme')
    expect(del.status).toBe(200)
    expect(del.json).toMatchObject({ plan: 'tiny', quota: 4, changed: false })
    expect((await send(a.port, { path: rows(ACME) })).status).toBe(429)
  })

  it('a team whose bases were all moved away still reports its month', async () => {
    expect((await admin(a, 'PUT', '/v1/teams/acme', { bases: [] })).status).toBe(200)
    const teams = await admin(b, 'GET', '/v1/teams')
    const acme = teams.json.teams.find((t: { id: string }) => t.id === 'acme')
    expect(acme.bases).toEqual([])
    expect(acme.used).toBe(5)
    expect((await admin(a, 'DELETE', '/v1/teams/acme')).status).toBe(200)
  })

  it('PUT validates: unknown team 404, bad JSON 400, bad fields 400', async () => {
    expect((await admin(a, 'PUT', '/v1/teams/nobody', { users: 2 })).status).toBe(404)
    const badJson = await admin(a, 'PUT', '/v1/teams/acme', '{"users": ')
    expect(badJson.status).toBe(400)
    expect(badJson.json.error_msg).toContain('JSON')
    const badPlan = await admin(a, 'PUT', '/v1/teams/acme', { plan: 'gold' })
    expect(badPlan.status).toBe(400)
    expect(badPlan.json.error_msg).toContain('gold')
    expect((await admin(a, 'DELETE', '/v1/teams/nobody')).status).toBe(404)
  })
})

describe('admin API (SPEC §7)', () => {
  it('needs the bearer token on every call but the probes, which answer anyone', async () => {
    for (const path of ['/healthz', '/readyz']) {
      expect((await admin(a, 'GET', path, undefined, {})).status, path).toBe(200)
      expect(
        (await admin(a, 'GET', path, undefined, { authorization: 'Bearer wrong' })).status
      ).toBe(200)
    }
    for (const path of ['/metrics', '/v1/teams', '/v1/config', '/v1/usage/ip/1.2.3.4']) {
      expect((await admin(a, 'GET', path, undefined, {})).status, path).toBe(401)
      expect(
        (await admin(a, 'GET', path, undefined, { authorization: 'Bearer wrong' })).status,
        path
      ).toBe(401)
      expect(
        (await admin(a, 'GET', path, undefined, { authorization: `Basic ${TOKEN}` })).status,
        path
      ).toBe(401)
      expect((await admin(a, 'GET', path)).status, path).toBe(200)
    }
    const r = await admin(a, 'GET', '/v1/teams', undefined, {})
    expect(r.json.error_msg).toEqual(expect.any(String))
  })

  it('healthz and readyz', async () => {
    expect((await admin(a, 'GET', '/healthz')).json).toEqual({ status: 'ok' })
    expect((await admin(a, 'GET', '/readyz')).status).toBe(200)
  })

  it('usage of a base and of an IP', async () => {
    const u = await admin(a, 'GET', `/v1/usage/base/${SOLO.toUpperCase()}`)
    expect(u.status).toBe(200)
    expect(u.json.key).toBe(`base:${SOLO}`)
    const base = u.json.windows.find((w: { class: string }) => w.class === 'base')
    expect(base).toMatchObject({ limit: 200, window_s: 60 })
    expect(base.used).toBeGreaterThanOrEqual(1)
    expect(base.remaining).toBe(200 - base.used)
    expect(base.reset).toEqual(expect.any(Number))
    expect(u.json.monthly).toMatchObject({ team: 'solo', quota: 10000 })
    const ip = await admin(a, 'GET', '/v1/usage/ip/127.0.0.1')
    expect(ip.json.key).toBe('ip:127.0.0.1')
    expect(ip.json.monthly).toBeNull()
    expect((await admin(a, 'GET', '/v1/usage/base/nope')).status).toBe(400)
    expect((await admin(a, 'GET', '/v1/usage/ip/999.1.1.1')).status).toBe(400)
  })

  it('/metrics is Prometheus text with the promised series', async () => {
    const r = await admin(a, 'GET', '/metrics')
    expect(r.headers['content-type']).toContain('text/plain')
    const lines = r.text.split('\n').filter((l) => l !== '')
    for (const l of lines) {
      expect(l, l).toMatch(
        /^(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*|[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? -?[0-9.e+-]+|[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? (NaN|\+Inf|-Inf))$/
      )
    }
    expect(r.text).toMatch(/basegate_requests_total\{class="base",outcome="forwarded"\} \d+/)
    expect(r.text).toMatch(/basegate_requests_total\{class="base",outcome="monthly_limited"\} \d+/)
    expect(r.text).toMatch(/basegate_refusals_total\{reason="monthly"\} \d+/)
    expect(r.text).toMatch(/basegate_store_duration_seconds_count \d+/)
    expect(r.text).toMatch(/basegate_upstream_duration_seconds_count \d+/)
    expect(r.text).toMatch(/basegate_monthly_quota\{team="acme"\} 4/)
    expect(r.text).toMatch(/basegate_monthly_used\{team="solo"\} \d+/)
    expect(r.text).toContain('basegate_store_errors_total')
  })

  it('/v1/config masks the token and the Redis password', async () => {
    const r = await admin(a, 'GET', '/v1/config')
    expect(r.status).toBe(200)
    expect(r.text).not.toContain(TOKEN)
    expect(r.json.admin.token).toBe('****')
    expect(r.json.rate_limits.base).toEqual(['200/min']) // the file's own names (issue #25)
  })

  it('no secret reaches a log', async () => {
    const all = JSON.stringify([...a.logs, ...b.logs])
    expect(all).not.toContain(TOKEN)
  })
})

describe('live reload (SPEC §2)', () => {
  it('POST /v1/reload applies a good file and refuses a bad one, naming the field', async () => {
    const g = await startLive(testYaml(up.url, 'rate_limits: { account: 5/min }\nheaders: all'))
    try {
      expect((await send(g.port, { path: '/api2/repos/' })).headers['x-ratelimit-limit']).toBe('5')
      writeFileSync(g.configFile, testYaml(up.url, 'rate_limits: { account: 5/mn }\nheaders: all'))
      const bad = await admin(g, 'POST', '/v1/reload', undefined, {})
      expect(bad.status).toBe(400)
      expect(bad.json.problems).toEqual([
        'rate_limits.account: "5/mn" is not a rate (write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited)',
      ])
      expect(bad.json.error_msg).toEqual(expect.any(String))
      expect((await send(g.port, { path: '/api2/repos/' })).headers['x-ratelimit-limit']).toBe('5')
      writeFileSync(
        g.configFile,
        testYaml(up.url, 'rate_limits: { account: 50/min }\nheaders: all')
      )
      const good = await admin(g, 'POST', '/v1/reload', undefined, {})
      expect(good.status).toBe(200)
      expect(good.json.reloaded).toBe(true)
      const r = await send(g.port, { path: '/api2/repos/' })
      expect(r.headers['x-ratelimit-limit']).toBe('50')
      expect(r.headers['x-ratelimit-remaining']).toBe('47') // counters kept
    } finally {
      await g.stop()
    }
  })

  it('a reload that raises a plan raises the quota, keeping what was used', async () => {
    const cfg = (plan: string) =>
      testYaml(
        up.url,
        `store: { url: "${redis.url}", prefix: "${redis.prefix}reload:" }
monthly:
  enabled: true
  plans: { small: { calls: 2 }, big: { calls: 3 } }
  teams: [ { id: t1, plan: ${plan}, bases: [${LONE}] } ]`
      )
    const g = await startLive(cfg('small'))
    try {
      expect((await send(g.port, { path: rows(LONE) })).status).toBe(200)
      expect((await send(g.port, { path: rows(LONE) })).status).toBe(200)
      expect((await send(g.port, { path: rows(LONE) })).status).toBe(429)
      writeFileSync(g.configFile, cfg('big'))
      expect((await admin(g, 'POST', '/v1/reload', undefined, {})).status).toBe(200)
      expect((await send(g.port, { path: rows(LONE) })).status).toBe(200)
      expect((await send(g.port, { path: rows(LONE) })).status).toBe(429)
    } finally {
      await g.stop()
    }
  })
})
