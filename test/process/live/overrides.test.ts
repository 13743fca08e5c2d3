import { parseList } from 'structured-headers'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { startLive, useLive } from '../../helpers/live.js'
import { rowsPath, send } from '../../helpers/http.js'
import { clusterList } from '../../helpers/redis-cluster.js'
import { useRedis } from '../../helpers/redis.js'
import { until } from '../../helpers/until.js'
import { startStubUpstream, type StubUpstream } from '../../helpers/stub-upstream.js'

// Issue #24 / SPEC §10: limits for particular bases, teams and clients.

const uuid = (n: number) => `${String(n).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
const HIGH = uuid(1)
const LOW = uuid(2)
const TEAM_A1 = uuid(3)
const TEAM_A2 = uuid(4)
const SHARED_1 = uuid(5)
const SHARED_2 = uuid(6)
const NAMED_IN_TEAM = uuid(7)
const TRIAL = uuid(8)
const PLAIN = uuid(9)
const RULED = uuid(10)

const FILE = `client_ip: { trusted_proxies: [127.0.0.0/8] }
header_style: both
rate_limits:
  base: 3/min
  ip_ceiling: 100/min
  rules: [ { name: list-rows, method: GET, path: "/api-gateway/api/v2/dtables/{base_uuid}/rows/", limits: 4/min } ]
monthly:
  enabled: false
  teams:
    - { id: acme, plan: free, bases: ["${TEAM_A1}", "${TEAM_A2}", "${NAMED_IN_TEAM}"] }
    - { id: pool, plan: free, bases: ["${SHARED_1}", "${SHARED_2}"] }
overrides:
  - { name: etl, bases: ["${HIGH}", "${NAMED_IN_TEAM}", "${RULED}"], limits: { base: 6/min } }
  - { name: slow, bases: ["${LOW}"], limits: { base: 1/min } }
  - { name: acme-team, teams: [acme], limits: { base: 2/min } }
  - { name: pool-shared, teams: [pool], shared: true, limits: { base: 4/min } }
  - { name: office, clients: [10.7.0.0/16], limits: { base: 5/min } }
  - { name: trial, bases: ["${TRIAL}"], mode: dry-run, limits: { base: 2/min } }
`

/** How many of n calls in a row are admitted. */
async function admitted(gw: Gateway, path: string, n: number, ip = '192.0.2.1') {
  let ok = 0
  for (let i = 0; i < n; i++) {
    const a = await send(gw.port, { path, headers: { 'x-forwarded-for': ip } })
    if (a.status === 200) ok++
  }
  return ok
}

describe('overrides in limits.yaml', () => {
  const live = useLive((up) => testYaml(up.url, FILE))

  it('a base override above and one below the class limit take its place', async () => {
    // The rows rule (4/min) still applies beside an override: use another path of the base.
    const tables = (u: string) => `/api-gateway/api/v2/dtables/${u}/tables/`
    expect(await admitted(live.gw, tables(HIGH), 8)).toBe(6)
    expect(await admitted(live.gw, tables(LOW), 3)).toBe(1)
    expect(await admitted(live.gw, tables(PLAIN), 5)).toBe(3)
  })

  it('a team override applies to each base of the team; shared: true counts the team once', async () => {
    const tables = (u: string) => `/api-gateway/api/v2/dtables/${u}/tables/`
    expect(await admitted(live.gw, tables(TEAM_A1), 4)).toBe(2)
    expect(await admitted(live.gw, tables(TEAM_A2), 4)).toBe(2)
    expect(
      (await admitted(live.gw, tables(SHARED_1), 3)) +
        (await admitted(live.gw, tables(SHARED_2), 3))
    ).toBe(4)
  })

  it('a client override by CIDR; a base named directly wins over its team, and either over the network', async () => {
    const tables = (u: string) => `/api-gateway/api/v2/dtables/${u}/tables/`
    expect(await admitted(live.gw, tables(uuid(20)), 7, '10.7.3.4')).toBe(5)
    // NAMED_IN_TEAM is in acme (2/min) and named by etl (6/min): etl.
    expect(await admitted(live.gw, tables(NAMED_IN_TEAM), 8, '10.7.3.4')).toBe(6)
    // A base of acme from the office network: the team's override.
    const teamCall = await send(live.gw.port, {
      path: tables(TEAM_A2),
      headers: { 'x-forwarded-for': '10.7.9.9' },
    })
    expect(teamCall.headers['x-ratelimit-limit']).toBe('2')
  })

  it('names the override in the IETF fields and keeps rules and ip_ceiling beside it', async () => {
    const a = await send(live.gw.port, {
      path: rowsPath(RULED),
      headers: { 'x-forwarded-for': '192.0.2.50' },
    })
    const policies = parseList(String(a.headers['ratelimit-policy']))
    const names = policies.map(([name]) => String(name))
    expect(names).toEqual(expect.arrayContaining(['etl', 'list-rows', 'ip_ceiling']))
    const etl = policies.find(([n]) => n === 'etl')!
    expect(etl[1].get('q')).toBe(6)
    // The rule (4/min) refuses before the override (6/min) would.
    expect(await admitted(live.gw, rowsPath(RULED), 5, '192.0.2.50')).toBe(3)
  })

  it('a dry-run override leaves the class limit in force and logs the calls it would refuse', async () => {
    const tables = `/api-gateway/api/v2/dtables/${TRIAL}/tables/`
    expect(await admitted(live.gw, tables, 4)).toBe(3)
    const line = await live.gw.waitForLog(
      (l) => Array.isArray(l.rules) && (l.rules as string[]).includes('trial')
    )
    expect(line).toMatchObject({ level: 'warn', dry_run: true, status: 200 })
    // Issue #41: the limit the dry-run override would have refused at, beside the one in force.
    expect(line.rule_limits).toEqual({ trial: '2/60s' })
  })

  it('shows which override applies in /v1/usage and lists them in /v1/overrides', async () => {
    const u = JSON.parse((await send(live.gw.adminPort, { path: `/v1/usage/base/${HIGH}` })).body)
    expect(u.override).toBe('etl')
    expect(u.windows.find((w: { class: string }) => w.class === 'base')).toMatchObject({
      limit: 6,
      override: 'etl',
    })
    const list = JSON.parse((await send(live.gw.adminPort, { path: '/v1/overrides' })).body)
    expect(list.overrides.map((o: { name: string }) => o.name)).toEqual([
      'etl',
      'slow',
      'acme-team',
      'pool-shared',
      'office',
      'trial',
    ])
  })
})

describe('overrides through the admin API, two instances on one Redis', () => {
  const db = useRedis()
  let up: StubUpstream
  const gws: Gateway[] = []
  beforeAll(async () => {
    up = await startStubUpstream()
    const yaml = testYaml(
      up.url,
      `store: { url: "${db.redis.url}", prefix: "${db.redis.prefix}ovr:" }
rate_limits: { base: 2/min }
monthly: { teams: [ { id: acme, plan: free, bases: ["${TEAM_A1}"] } ] }
overrides: [ { name: from-file, bases: ["${LOW}"], limits: { base: 1/min } } ]`
    )
    gws.push(await startLive(yaml), await startLive(yaml))
  })
  afterAll(async () => {
    for (const g of gws) await g.stop()
    await up?.close()
  })
  const put = (name: string, body: unknown, i = 0) =>
    send(gws[i]!.adminPort, {
      method: 'PUT',
      path: `/v1/overrides/${name}`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
  const limitOn = async (i: number, u: string) =>
    (await send(gws[i]!.port, { path: `/api-gateway/api/v2/dtables/${u}/tables/` })).headers[
      'x-ratelimit-limit'
    ]

  it('a PUT on one instance applies on the other within a second; DELETE takes it away', async () => {
    const r = await put('nightly', { bases: [HIGH], limits: { base: '50/min' } })
    expect(r.status).toBe(200)
    expect(JSON.parse(r.body)).toMatchObject({
      name: 'nightly',
      source: 'api',
      limits: { base: ['50/min'] },
    })
    await until(
      'the PUT seen by the other instance',
      () => limitOn(1, HIGH),
      (l) => l === '50',
      {
        timeoutMs: 1000,
      }
    )
    const del = await send(gws[1]!.adminPort, { method: 'DELETE', path: '/v1/overrides/nightly' })
    expect(del.status).toBe(200)
    await until(
      'the DELETE seen by the other instance',
      () => limitOn(0, HIGH),
      (l) => l === '2',
      {
        timeoutMs: 1000,
      }
    )
  })

  it("replaces and deletes the file's override too", async () => {
    expect(await limitOn(0, LOW)).toBe('1')
    expect((await put('from-file', { bases: [LOW], limits: { base: '9/min' } }, 1)).status).toBe(
      200
    )
    expect(await limitOn(1, LOW)).toBe('9')
    const list = JSON.parse((await send(gws[0]!.adminPort, { path: '/v1/overrides' })).body)
    expect(list.overrides).toEqual([expect.objectContaining({ name: 'from-file', source: 'api' })])
    await send(gws[0]!.adminPort, { method: 'DELETE', path: '/v1/overrides/from-file' })
    expect(
      JSON.parse((await send(gws[0]!.adminPort, { path: '/v1/overrides' })).body).overrides
    ).toEqual([])
    expect(await limitOn(0, LOW)).toBe('2')
    expect(
      (await send(gws[0]!.adminPort, { method: 'DELETE', path: '/v1/overrides/nope' })).status
    ).toBe(404)
  })

  it('refuses a bad body, naming each field', async () => {
    const r = await put('bad', {
      bases: ['not-a-uuid'],
      teams: ['nobody'],
      clients: ['10.0.0.0/99'],
      limits: { base: '5/fortnight' },
      shared: true,
    })
    expect(r.status).toBe(400)
    const problems = JSON.parse(r.body).problems as string[]
    const fields = problems.map((p) => p.split(':')[0])
    expect(fields).toEqual(expect.arrayContaining(['limits.base']))
    const r2 = await put('bad', {
      bases: ['not-a-uuid'],
      teams: ['nobody'],
      clients: ['10.0.0.0/99'],
      limits: { base: '5/min' },
      shared: true,
    })
    const fields2 = (JSON.parse(r2.body).problems as string[]).map((p) => p.split(':')[0])
    expect(fields2).toEqual(
      expect.arrayContaining(['bases[0]', 'teams[0]', 'clients[0]', 'shared'])
    )
    expect((await put('bad*name', { bases: [HIGH], limits: { base: '1/min' } })).status).toBe(400)
    expect((await put('x', { bases: [HIGH], limits: {} })).status).toBe(400)
    expect(
      (await put('x', { bases: [HIGH], limits: { base: '1/min' }, colour: 'red' })).status
    ).toBe(400)
  })
})

describe('a shared team window on a 3-node Redis Cluster', () => {
  const gws = useLive(
    (up, cluster) =>
      testYaml(
        up.url,
        `store: { cluster: ${clusterList(cluster!)}, timeout_ms: 500 }
rate_limits: { base: 100/min, rules: [ { name: tables, path: "/api-gateway/api/v2/dtables/{base_uuid}/tables/", limits: 3/min } ] }
monthly: { teams: [ { id: pool, plan: free, bases: ["${SHARED_1}", "${SHARED_2}"] } ] }
overrides: [ { name: pool, teams: [pool], shared: true, limits: { base: 5/min } } ]`
      ),
    {
      cluster: true,
      instances: 2,
    }
  ).gws

  it('counts the team once across instances, all or nothing with the base rule in another slot', async () => {
    const tables = (u: string) => `/api-gateway/api/v2/dtables/${u}/tables/`
    // The base's rule (3/min, slot {b:}) refuses the 4th call on SHARED_1: the team window
    // ({t:}) must not have been charged for it.
    let ok1 = 0
    for (let i = 0; i < 4; i++)
      if ((await send(gws[i % 2]!.port, { path: tables(SHARED_1) })).status === 200) ok1++
    expect(ok1).toBe(3)
    let ok2 = 0
    for (let i = 0; i < 4; i++)
      if ((await send(gws[i % 2]!.port, { path: tables(SHARED_2) })).status === 200) ok2++
    // 5 a minute for the team: 3 used by SHARED_1, so 2 left for SHARED_2.
    expect(ok2).toBe(2)
  })
})
