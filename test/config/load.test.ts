import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { expandVars, parseConfig } from '../../src/config/load.js'

const fixture = (name: string) =>
  readFileSync(new URL(`../fixtures/config/${name}`, import.meta.url), 'utf8')
const lines = (text: string, env: NodeJS.ProcessEnv = {}) => {
  const r = parseConfig(text, env)
  if (r.ok) throw new Error('expected problems')
  return r.problems.map((p) => `${p.field}: ${p.message}`)
}

describe('parseConfig: defaults and presets', () => {
  it('an empty file is the self-hosted defaults', () => {
    const r = parseConfig('', {})
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    const c = r.config
    expect(c.deployment).toBe('self-hosted')
    expect(c.rateLimits.base.map((x) => x.text)).toEqual(['500/min'])
    expect(c.rateLimits.account.map((x) => x.text)).toEqual(['3000/min'])
    expect(c.rateLimits.authToken).toEqual([])
    expect(c.rateLimits.other).toEqual([])
    expect(c.listen).toEqual({
      host: '0.0.0.0',
      port: 8080,
      headersTimeoutMs: 20_000,
      requestTimeoutMs: 300_000,
      keepaliveTimeoutMs: 5_000,
      maxConnections: 'auto',
      maxConnectionsPerClient: 256,
      tls: null,
    })
    // SPEC §4: one client's parts of the pool and of the held bodies, and the body's pace.
    expect(c.upstream).toMatchObject({ maxConnectionsPerClient: 32, bufferRequestBytes: 1_048_576 })
    expect(c.sizeLimits).toMatchObject({ clientShare: 1 / 8, minBodyRate: 8_192 })
    expect(c.admin).toEqual({ host: '127.0.0.1', port: 9090, token: '' })
    expect(c.upstream.timeoutMs).toBe(60_000)
    expect(c.store).toMatchObject({ url: '', prefix: 'basegate:', timeoutMs: 100, onError: 'open' })
    expect(c.clientIp.ipv6Prefix).toBe(64)
    expect(c.headers).toBe('gateway')
    expect(c.mode).toBe('enforce')
    expect(c.exempt).toEqual(['/ping', '/server-info', '/api2/ping', '/api-gateway/api/v2/ping'])
    expect(c.monthly.enabled).toBe(false)
  })

  it.each([
    ['cloud', '200/min', '1000/min', ['60/min'], true],
    ['dedicated', '500/min', '3000/min', [], false],
    ['self-hosted', '500/min', '3000/min', [], false],
  ])('the %s preset', (deployment, base, account, auth, monthly) => {
    const r = parseConfig(`deployment: ${deployment}`, {})
    if (!r.ok) throw new Error('bad')
    expect(r.config.rateLimits.base.map((x) => x.text)).toEqual([base])
    expect(r.config.rateLimits.account.map((x) => x.text)).toEqual([account])
    expect(r.config.rateLimits.authToken.map((x) => x.text)).toEqual(auth)
    expect(r.config.monthly.enabled).toBe(monthly)
  })

  it('overrides beat the preset; a list of rates all apply', () => {
    const r = parseConfig(
      'deployment: cloud\nrate_limits: { base: [100/min, 5000/hour], auth_token: unlimited }',
      {}
    )
    if (!r.ok) throw new Error('bad')
    expect(r.config.rateLimits.base.map((x) => [x.limit, x.windowMs])).toEqual([
      [100, 60_000],
      [5000, 3_600_000],
    ])
    expect(r.config.rateLimits.authToken).toEqual([])
    expect(r.config.rateLimits.account.map((x) => x.text)).toEqual(['1000/min'])
  })

  it('the shipped limits.yaml is valid and is the self-hosted defaults', () => {
    const text = readFileSync(new URL('../../limits.yaml', import.meta.url), 'utf8')
    const shipped = parseConfig(text, {})
    const empty = parseConfig('', {})
    if (!shipped.ok || !empty.ok) throw new Error('bad')
    expect(shipped.config).toEqual({
      ...empty.config,
      upstream: { ...empty.config.upstream, url: 'http://127.0.0.1:8000' },
    })
  })

  it('reads rules with methods, path and limits', () => {
    const r = parseConfig(
      'rate_limits:\n  rules:\n    - { name: list-rows, method: [get], path: "/api-gateway/api/v2/dtables/{base_uuid}/rows/", limits: [100/min, 6000/hour] }',
      {}
    )
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    expect(r.config.rateLimits.rules[0]).toMatchObject({ name: 'list-rows', methods: ['GET'] })
    expect(r.config.rateLimits.rules[0]!.limits).toHaveLength(2)
  })
})

describe('parseConfig: ${VAR} expansion', () => {
  it('expands set variables and defaults, and re-reads unquoted values as YAML', () => {
    const r = parseConfig(
      'listen:\n  port: ${PORT:-8181}\nstore: { url: "${REDIS_URL:-}", prefix: "${P}x" }',
      { P: 'bg-' }
    )
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    expect(r.config.listen.port).toBe(8181)
    expect(r.config.store.url).toBe('')
    expect(r.config.store.prefix).toBe('bg-x')
  })

  it('uses the variable over its default, and leaves comments alone', () => {
    const r = parseConfig('# ${NOT_SET_ANYWHERE}\nlisten:\n  port: ${PORT:-8181}', { PORT: '9999' })
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    expect(r.config.listen.port).toBe(9999)
  })

  it('expandVars handles $$ and empty values', () => {
    const missing: string[] = []
    expect(expandVars('a$${B}c', {}, (n) => missing.push(n))).toBe('a${B}c')
    expect(expandVars('${E:-d}', { E: '' }, (n) => missing.push(n))).toBe('d')
    expect(missing).toEqual([])
  })
})

describe('parseConfig: every problem named by its field', () => {
  it.each([
    [
      'bad-rate.yaml',
      [
        'rate_limits.base: "500/mn" is not a rate (write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited)',
      ],
    ],
    [
      'bad-rate-in-list.yaml',
      [
        'rate_limits.account[1]: "10/fortnight" is not a rate (write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited)',
      ],
    ],
    ['unknown-key.yaml', ['rate_limit: is not a known key (line 1; did you mean rate_limits?)']],
    [
      'bad-enum.yaml',
      [
        'deployment: must be one of "cloud", "dedicated", "self-hosted", got "on-prem"',
        'headers: must be one of "gateway", "all", "none", got "some"',
      ],
    ],
    [
      'bad-types.yaml',
      ['upstream.timeout_ms: expected number, got "soon"', 'exempt: expected array, got "/ping"'],
    ],
    [
      'bad-urls.yaml',
      [
        'upstream.url: "ftp://example" must start with http:// or https://',
        'store.url: "http://127.0.0.1:6379" must start with redis:// or rediss://',
      ],
    ],
    [
      'bad-proxy-cidr.yaml',
      ['client_ip.trusted_proxies[1]: "10.0.0.300/8" is not an IP address or CIDR'],
    ],
    [
      'public-admin-no-token.yaml',
      ['admin.host: "0.0.0.0" is not loopback; set admin.token to listen there'],
    ],
    [
      'admin-on-proxy-port.yaml',
      ["admin.port: 8080 is the proxy's port (listen.port); the admin listener needs its own"],
    ],
    [
      'missing-var.yaml',
      [
        'store.url: ${BASEGATE_TEST_UNSET_VAR} is not set (write ${BASEGATE_TEST_UNSET_VAR:-} for an empty default)',
      ],
    ],
  ])('%s', (file, expected) => {
    expect(lines(fixture(file))).toEqual(expected)
  })

  it('bad-port.yaml names the port', () => {
    expect(lines(fixture('bad-port.yaml'))).toEqual([expect.stringMatching(/^listen\.port: /)])
  })

  it('store.leases is off unless set, and must be true or false', () => {
    const off = parseConfig('store: { url: "redis://127.0.0.1:6379" }', {})
    const on = parseConfig('store: { url: "redis://127.0.0.1:6379", leases: true }', {})
    if (!off.ok || !on.ok) throw new Error('expected valid configs')
    expect(off.config.store.leases).toBe(false)
    expect(on.config.store.leases).toBe(true)
    expect(lines('store: { leases: "yes" }')).toEqual([expect.stringMatching(/^store\.leases: /)])
  })

  it('bad-rule.yaml reports each rule field', () => {
    const out = lines(fixture('bad-rule.yaml'))
    expect(out).toContain('rate_limits.rules[1].method[0]: "G3T" is not an HTTP method')
    expect(out).toContain('rate_limits.rules[1].path: a rule path starts with /')
    expect(out).toContain(
      'rate_limits.rules[1].limits[0]: "nope" is not a rate' +
        ' (write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited)'
    )
  })

  it('cross-field rule checks: duplicate names and * not at the end', () => {
    const out = lines(
      'rate_limits:\n  rules:\n    - { name: a, path: "/x/*/y", limits: 1/min }\n    - { name: a, path: /z, limits: 1/min }'
    )
    expect(out).toEqual([
      'rate_limits.rules[0].path: * is allowed only at the end',
      'rate_limits.rules[1].name: "a" is used by another rule',
    ])
  })

  it('bad-monthly.yaml names each field', () => {
    const out = lines(fixture('bad-monthly.yaml'))
    // Issue #12: every problem in one pass: the schema's and the cross-field checks' together.
    // Issue #49: in the order the fields stand in the file; a plan that is not one lists them.
    expect(out).toEqual([
      'monthly.timezone: "Mars/Olympus" is not a time zone',
      'monthly.plans.odd: a plan has exactly one of calls or calls_per_user',
      'monthly.teams[0].plan: "gold" is not a plan (the plans: free, plus, enterprise)',
      'monthly.teams[0].bases[0]: "not-a-uuid" is not a base UUID',
    ])
    const out2 = lines(
      'monthly:\n  timezone: Mars/Olympus\n  teams:\n    - { id: t, plan: gold, bases: [not-a-uuid] }'
    )
    expect(out2).toEqual([
      'monthly.timezone: "Mars/Olympus" is not a time zone',
      'monthly.teams[0].plan: "gold" is not a plan (the plans: free, plus, enterprise)',
      'monthly.teams[0].bases[0]: "not-a-uuid" is not a base UUID',
    ])
  })

  it("env, schema and cross-field problems come together, in basegate's words", () => {
    const out = lines(
      'listen: { port: 8080 }\nadmin: { port: 8080, host: 0.0.0.0 }\nstore: { url: "${NOPE}", timeout_ms: 0 }\nrate_limits: { base: 5/mn }\nsize_limits: { list_rows: -1 }\nbogus: 1'
    )
    expect(out).toEqual(
      expect.arrayContaining([
        'store.url: ${NOPE} is not set (write ${NOPE:-} for an empty default)',
        'store.timeout_ms: must be at least 1, got 0',
        'rate_limits.base: "5/mn" is not a rate (write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited)',
        'size_limits.list_rows: must be at least 1, got -1',
        'bogus: is not a known key (line 6)',
        'admin.host: "0.0.0.0" is not loopback; set admin.token to listen there',
        "admin.port: 8080 is the proxy's port (listen.port); the admin listener needs its own",
      ])
    )
    expect(out.join('\n')).not.toMatch(/Too small|Invalid input|expected number to be/)
  })

  it('a YAML slip is one line: the first error, and how many more follow it (issue #49)', () => {
    // An unquoted `{base_uuid}` at the start of a rule path made 183 lines of parser cascade.
    const out = lines(
      'rate_limits:\n  rules:\n    - name: rows\n      path: {base_uuid}/rows/{row_id}/\n      limits: [5/min]\n    - name: more\n      path: {base_uuid}/links/\n      limits: [5/min]\n'
    )
    expect(out).toHaveLength(1)
    expect(out[0]).toMatch(
      /^limits\.yaml: .*line \d+.* \(and \d+ more YAML errors? after it, which may follow from this one\)$/
    )
  })

  it('a YAML syntax error names the file it is in', async () => {
    const { loadConfigFile } = await import('../../src/config/load.js')
    const file = new URL('../fixtures/config/bad-yaml.yaml', import.meta.url).pathname
    const r = await loadConfigFile(file)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.problems[0]!.field).toBe(file)
  })

  it('bad-yaml.yaml reports the YAML error', () => {
    const out = lines(fixture('bad-yaml.yaml'))
    expect(out.length).toBeGreaterThan(0)
    expect(out[0]).toMatch(/^limits\.yaml: /)
    // Issue #34: the line says where, and does not end in the colon of an excerpt left out.
    expect(out[0]).toMatch(/line \d+, column \d+$/)
  })

  it('issue #34: an unknown key says its line and the known key it may have meant, at any depth', () => {
    expect(
      lines(`listen: { port: 8080 }
size_limits:
  max_body_byte: 100
  spil_bytes: 10
monthly:
  teams:
    - { id: a, plan: free, user: 3, bases: [] }
frobnicate: 1`)
    ).toEqual([
      'size_limits.max_body_byte: is not a known key (line 3; did you mean max_body_bytes?)',
      'size_limits.spil_bytes: is not a known key (line 4; did you mean spill_bytes?)',
      'monthly.teams[0].user: is not a known key (line 7; did you mean users?)',
      'frobnicate: is not a known key (line 8)',
    ])
  })

  it('a rate that is neither text nor a list', () => {
    expect(lines('rate_limits: { base: 500 }')).toEqual([
      'rate_limits.base: expected a rate or a list of rates, got 500',
    ])
  })
})

describe('parseConfig: workers (issue #14)', () => {
  const redis = 'store: { url: "redis://127.0.0.1:6379" }\n'
  it('is 1 by default, and takes N or auto with a shared store', () => {
    const one = parseConfig('', {})
    const auto = parseConfig(`${redis}workers: auto`, {})
    const four = parseConfig(`${redis}workers: 4`, {})
    expect([one, auto, four].map((r) => r.ok && r.config.workers)).toEqual([1, 'auto', 4])
  })
  it('refuses more than one worker on the in-memory store, naming the field', () => {
    expect(lines('workers: 2')).toEqual([
      'workers: 2 needs a shared store (store.url or store.cluster): with the in-memory store each worker would count alone',
    ])
    expect(lines('workers: auto')[0]).toMatch(/^workers: "auto" needs a shared store/)
    expect(parseConfig('workers: 1', {}).ok).toBe(true)
  })
  it.each([
    ['0', 'must be at least 1, got 0'],
    ['65', 'must be at most 64, got 65'],
    ['1.5', '1.5 is not a worker count (1 to 64, or auto)'],
    ['"many"', '"many" is not a worker count (1 to 64, or auto)'],
    ['true', 'true is not a worker count (1 to 64, or auto)'],
  ])('refuses workers: %s', (v, message) => {
    expect(lines(`${redis}workers: ${v}`)).toEqual([`workers: ${message}`])
  })
})

// Issue #22: `base: [100/min, 50/min]` shared one counter, charged each call twice and admitted
// 26 a minute; `check` said valid.
describe('two rates with one window', () => {
  it.each([
    ['rate_limits: { base: [100/min, 50/min] }', 'rate_limits.base'],
    ['rate_limits: { account: [1/s, 5/sec] }', 'rate_limits.account'],
    ['rate_limits: { ip_ceiling: [10/minute, 20/min] }', 'rate_limits.ip_ceiling'],
    [
      'rate_limits: { rules: [{ name: r, path: /x, limits: [5/hour, 6/hour] }] }',
      'rate_limits.rules[0].limits',
    ],
  ])('%s is refused naming %s', (yaml, field) => {
    const r = parseConfig(yaml, {})
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.problems.map((p) => p.field)).toContain(field)
  })

  it('rates with different windows are fine', () => {
    expect(parseConfig('rate_limits: { base: [100/min, 6000/hour, 5/s] }', {}).ok).toBe(true)
  })
})

// Issue #25: `check` lists every problem at once: a broken rule no longer stops the cross-field
// checks nor adds a second, bogus line; a rule that can never match is a warning.
describe('every problem at once, and rules that can never match', () => {
  it('a bad rule path and a cross-field problem, one line each', () => {
    const r = parseConfig(
      'rate_limits: { base: [100/min, 50/min], rules: [{ name: a, path: rows, limits: 5/min }, { name: b, path: /x, limits: 5/mn }] }\nadmin: { host: 0.0.0.0 }',
      {}
    )
    expect(r.ok).toBe(false)
    if (r.ok) return
    const fields = r.problems.map((p) => p.field)
    expect(fields).toContain('rate_limits.rules[0].path')
    expect(fields).toContain('rate_limits.rules[1].limits')
    expect(fields).toContain('rate_limits.base')
    expect(fields).toContain('admin.host')
    // One line for the broken path: not also "required" for it, nor one for a stand-in.
    expect(fields.filter((f) => f.startsWith('rate_limits.rules[0]'))).toEqual([
      'rate_limits.rules[0].path',
    ])
    expect(r.problems.every((p) => !p.message.includes('set-aside'))).toBe(true)
  })

  it('warns about {baseuuid} and a method no request has, and still loads', () => {
    const r = parseConfig(
      'upstream: { url: "http://127.0.0.1:8000" }\nrate_limits: { rules: [{ name: a, method: [GETT], path: "/api-gateway/api/v2/dtables/{baseuuid}/rows/", limits: 5/min }] }',
      {}
    )
    expect(r.ok).toBe(true)
    if (!r.ok) return
    expect(r.warnings.map((w) => w.field)).toEqual([
      'rate_limits.rules[0].path',
      'rate_limits.rules[0].method',
    ])
    expect(r.warnings[0]!.message).toContain('{baseuuid}')
  })

  it('refuses a placeholder admin token (an unfilled env.example under compose 1.x)', () => {
    const r = parseConfig('admin: { token: "# openssl rand -hex 24" }', {})
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.problems[0]!.field).toBe('admin.token')
  })
})

// Issue #23 / SPEC §9: the protection settings, each problem named by its field.
describe('protect, delay_ms and charge (SPEC §9)', () => {
  it('is off by default: unlimited, nothing delayed, server errors charged', () => {
    const r = parseConfig('', {})
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    expect(r.config.protect).toEqual({
      maxInFlight: Infinity,
      minInFlight: 4,
      queueMs: 1000,
      priority: ['other', 'auth_token', 'account', 'base'],
      keyInFlight: Infinity,
    })
    expect(r.config.rateLimits.delayMs).toBe(0)
    expect(r.config.charge.serverErrors).toBe(true)
  })

  it('reads every setting; classes left out of priority wait after the listed ones', () => {
    const r = parseConfig(
      'protect: { max_in_flight: auto, min_in_flight: 2, queue_ms: 250, priority: [account], key_in_flight: 3 }\nrate_limits: { delay_ms: 800 }\ncharge: { server_errors: false }',
      {}
    )
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    expect(r.config.protect).toEqual({
      maxInFlight: 'auto',
      minInFlight: 2,
      queueMs: 250,
      priority: ['account', 'other', 'auth_token', 'base'],
      keyInFlight: 3,
    })
    expect(r.config.rateLimits.delayMs).toBe(800)
    expect(r.config.charge.serverErrors).toBe(false)
  })

  it.each([
    ['protect: { max_in_flight: 0 }', 'protect.max_in_flight'],
    ['protect: { max_in_flight: lots }', 'protect.max_in_flight'],
    ['protect: { queue_ms: -1 }', 'protect.queue_ms'],
    ['protect: { priority: [other, people] }', 'protect.priority[1]'],
    ['protect: { priority: [base, base] }', 'protect.priority[1]'],
    ['protect: { max_in_flight: 4, key_in_flight: 5 }', 'protect.key_in_flight'],
    ['protect: { min_in_flight: 0 }', 'protect.min_in_flight'],
    ['protect: { key_in_flight: 0 }', 'protect.key_in_flight'],
    ['rate_limits: { delay_ms: -5 }', 'rate_limits.delay_ms'],
    ['charge: { server_errors: maybe }', 'charge.server_errors'],
  ])('%s is refused naming %s', (yaml, field) => {
    const r = parseConfig(yaml, {})
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.problems.map((p) => p.field)).toContain(field)
  })
})

// Issue #24 / SPEC §10: overrides in the file, each problem named by its field, all at once.
describe('overrides (SPEC §10)', () => {
  const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
  const teams = `monthly: { teams: [ { id: acme, plan: free, bases: ["${U}"] } ] }\n`

  it('reads bases, teams and clients, per-class limits, shared and mode', () => {
    const r = parseConfig(
      `${teams}overrides:
  - { name: etl, bases: ["${U}"], limits: { base: 2000/min, account: [5000/min, 100000/day] } }
  - { name: acme, teams: [acme], shared: true, limits: { base: unlimited }, mode: dry-run }
  - { name: office, clients: [10.0.0.0/8], limits: { other: 10/s } }`,
      {}
    )
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    const [etl, acme, office] = r.config.overrides
    expect(etl).toMatchObject({
      name: 'etl',
      bases: ['6f1c2a4e0d3b4c599a513e2d7c8b9a10'],
      mode: 'enforce',
    })
    expect(etl!.limits.account!.map((x) => x.text)).toEqual(['5000/min', '100000/day'])
    expect(acme).toMatchObject({
      teams: ['acme'],
      shared: true,
      mode: 'dry-run',
      limits: { base: [] },
    })
    expect(office).toMatchObject({ clients: ['10.0.0.0/8'] })
  })

  it('names every problem at once, one line each', () => {
    expect(
      lines(
        `${teams}overrides:
  - { name: a, teams: [nobody], limits: { base: 5/min } }
  - { name: b, clients: [10.0.0.0/99], limits: { base: 5/min } }
  - { name: c, bases: ["${U}"], limits: { base: 5/fortnight } }
  - { name: d, bases: ["${U}"], shared: true, limits: { base: 5/min } }
  - { name: a, bases: ["${U}"], limits: { base: 5/min } }
  - { name: f, limits: { base: 5/min } }
  - { name: g, bases: ["${U}"], limits: {} }`
      )
    ).toEqual([
      'overrides[0].teams[0]: "nobody" is not a team of monthly.teams',
      'overrides[1].clients[0]: "10.0.0.0/99" is not an IP address or CIDR',
      'overrides[2].limits.base: "5/fortnight" is not a rate (write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited)',
      'overrides[3].shared: is for teams only: an override with shared: true names teams, and no bases or clients',
      'overrides[4].name: "a" is used by another override',
      'overrides[5]: names no base, team or client',
      'overrides[6].limits: names no class (account, base, auth_token, other)',
    ])
  })

  it('issue #31 item 6: CIDRs as ipaddr.js reads them strictly (no leading zeros, no zone)', () => {
    expect(
      lines(
        `overrides:
  - { name: a, clients: [010.0.0.1/8, "fe80::1%eth0/64", 10.1/8, 10.0.0.0/08], limits: { base: 5/min } }
allow: { clients: [192.168.01.1] }
client_ip: { trusted_proxies: ["fe80::1%lo"] }`
      )
    ).toEqual([
      'overrides[0].clients[0]: "010.0.0.1/8" is not an IP address or CIDR',
      'overrides[0].clients[1]: "fe80::1%eth0/64" is not an IP address or CIDR',
      'overrides[0].clients[2]: "10.1/8" is not an IP address or CIDR',
      'overrides[0].clients[3]: "10.0.0.0/08" is not an IP address or CIDR',
      'allow.clients[0]: "192.168.01.1" is not an IP address or CIDR',
      'client_ip.trusted_proxies[0]: "fe80::1%lo" is not an IP address or CIDR',
    ])
    const ok = parseConfig(`overrides:
  - { name: a, clients: [10.0.0.0/8, "::ffff:10.0.0.1", "2001:db8::/32", 0.0.0.0/0], limits: { base: 5/min } }`)
    expect(ok.ok).toBe(true)
  })
})

describe('slow and idle clients, and slips in lists (issue #39)', () => {
  it('reads the connection, pool and body bounds; refuses what cannot be meant, naming the field', () => {
    const ok = parseConfig(
      'listen: { max_connections: 500, max_connections_per_client: 20, keepalive_timeout_ms: 2000 }\nupstream: { max_connections: 64, max_connections_per_client: 4, buffer_request_bytes: 0 }\nsize_limits: { client_share: 0.25, min_body_rate: 0 }'
    )
    if (!ok.ok) throw new Error(JSON.stringify(ok.problems))
    expect(ok.config.listen).toMatchObject({
      maxConnections: 500,
      maxConnectionsPerClient: 20,
      keepaliveTimeoutMs: 2000,
    })
    expect(ok.config.upstream).toMatchObject({ maxConnectionsPerClient: 4, bufferRequestBytes: 0 })
    expect(ok.config.sizeLimits).toMatchObject({ clientShare: 0.25, minBodyRate: 0 })
    // 1/8 of the pool by default.
    const dflt = parseConfig('upstream: { max_connections: 100 }')
    expect(dflt.ok && dflt.config.upstream.maxConnectionsPerClient).toBe(12)
    expect(
      lines(
        'listen: { max_connections: 0, max_connections_per_client: -1 }\nupstream: { max_connections: 8, max_connections_per_client: 9 }\nsize_limits: { client_share: 3/2, min_body_rate: -5 }'
      )
    ).toEqual([
      'listen.max_connections: must be at least 1, got 0',
      'listen.max_connections_per_client: must be at least 1, got -1',
      'upstream.max_connections_per_client: 9 is above upstream.max_connections (8)',
      'size_limits.client_share: "3/2" is not a share (1/8, or a number above 0 up to 1)',
      'size_limits.min_body_rate: must be at least 0, got -5',
    ])
  })

  it('a CIDR with bits set past its prefix, and one base named twice in two spellings', () => {
    expect(
      lines(`overrides:
  - { name: a, clients: [1.2.3.4/8, "2001:db8::1/32", 10.0.0.0/8], bases: [6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10, 6F1C2A4E0D3B4C599A513E2D7C8B9A10], limits: { base: 5/min } }
client_ip: { trusted_proxies: [192.168.1.7/24] }`)
    ).toEqual([
      'overrides[0].clients[0]: "1.2.3.4/8" has bits set past its prefix: write its network, 1.0.0.0/8',
      'overrides[0].clients[1]: "2001:db8::1/32" has bits set past its prefix: write its network, 2001:db8::/32',
      'overrides[0].bases[1]: "6F1C2A4E0D3B4C599A513E2D7C8B9A10" is the base of overrides[0].bases[0] again',
      'client_ip.trusted_proxies[0]: "192.168.1.7/24" has bits set past its prefix: write its network, 192.168.1.0/24',
    ])
  })
})

describe('values an operator did not choose (issue #34 item 8)', () => {
  const up = 'upstream: { url: "http://10.0.0.5:8000" }\n'
  it('a shipped variable set in the environment that this file does not read is a warning naming its setting', () => {
    const r = parseConfig(up + 'store: { url: "redis://10.0.0.9:6379" }', {
      REDIS_URL: 'redis://other:6379',
      BASEGATE_ADMIN_TOKEN: 'x',
    })
    expect(r.ok).toBe(true)
    if (!r.ok) return
    expect(r.warnings.map((w) => w.field)).toEqual(['store.url', 'admin.token'])
    expect(r.warnings[0]!.message).toMatch(
      /^REDIS_URL is set in the environment, but this file does not read it \(write url: "\$\{REDIS_URL\}" under store to use it\)/
    )
  })
  it('issue #41: a comment naming the variable does not read it', () => {
    const r = parseConfig(up + '# upstream: { url: "${BASEGATE_UPSTREAM}" }\nmode: enforce', {
      BASEGATE_UPSTREAM: 'http://10.0.0.7:8000',
    })
    expect(r.ok && r.warnings.map((w) => w.field)).toEqual(['upstream.url'])
  })

  it('a file that reads the variable, or an environment without it, says nothing', () => {
    const r = parseConfig(up + 'store: { url: "${REDIS_URL:-}" }', { REDIS_URL: 'redis://x:6379' })
    expect(r.ok && r.warnings).toEqual([])
  })
  it('an upstream.url left to its default says so', () => {
    const r = parseConfig('{}', {})
    expect(r.ok && r.warnings.map((w) => `${w.field}: ${w.message}`)).toEqual([
      'upstream.url: is not set: calls go to the default http://127.0.0.1:8000 (set upstream.url, or --upstream)',
    ])
    expect(parseConfig('{}', {}, 'limits.yaml', { upstream: 'http://x:1' }).ok && true).toBe(true)
    const flagged = parseConfig('{}', {}, 'limits.yaml', { upstream: 'http://x:1' })
    expect(flagged.ok && flagged.warnings).toEqual([])
  })
})
