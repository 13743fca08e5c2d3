import { describe, expect, it } from 'vitest'
import { inProcess, BASE as U } from '../helpers/in-process.js'

// createGateway in process (test/helpers/in-process.ts): sharper and faster than a spawned
// process for the request path.

describe('createGateway in process', () => {
  it('admits to the limit, then answers a bare 429 with retry-after; one log line per request', async () => {
    const g = inProcess('rate_limits: { base: 2/min }')
    const path = `/api-gateway/api/v2/dtables/${U}/metadata/`
    expect((await g.call('GET', path)).status).toBe(200)
    const second = await g.call('GET', path)
    expect(second.headers!['x-ratelimit-remaining']).toBe(0)
    const third = await g.call('GET', path)
    expect(third.status).toBe(429)
    // SPEC §3: the window, plus at most 1/50 of it (the bucket), rounded up.
    expect(Number(third.headers!['retry-after'])).toBeGreaterThanOrEqual(60)
    expect(Number(third.headers!['retry-after'])).toBeLessThanOrEqual(62)
    expect(third.body).toBe('')
    expect(g.forwarded).toHaveLength(2)
    expect(g.lines.filter((l) => l.method === 'GET').map((l) => l.outcome)).toEqual([
      'forwarded',
      'forwarded',
      'rate_limited',
    ])
  })

  it('a refusal the store decides without I/O is answered within handleRequest (issue #26)', async () => {
    const g = inProcess('rate_limits: { base: 1/min }')
    const path = `/api-gateway/api/v2/dtables/${U}/metadata/`
    expect((await g.call('GET', path)).status).toBe(200)
    const refused = await g.call('GET', path)
    expect(refused.status).toBe(429)
    expect(refused.sync).toBe(true)
    // Its line was written in that same call, with everything SPEC §7 asks of it.
    const line = g.lines.at(-1)!
    expect(line).toMatchObject({
      level: 'warn',
      status: 429,
      outcome: 'rate_limited',
      remaining: 0,
    })
    expect(line.request_id).toBe(refused.headers!['x-request-id'])
  })

  it('a bad path and a duplicate Host are request lines too, with their outcome', async () => {
    const g = inProcess('{}')
    expect((await g.call('GET', '/a/%2F/b')).status).toBe(400)
    expect((await g.call('GET', '/x', { headers: { host: 'a' } })).status).toBe(200)
    expect(g.lines.find((l) => l.outcome === 'bad_path')).toMatchObject({
      status: 400,
      class: 'unknown',
    })
  })

  it('dry-run: a call over the limit whose upstream then fails keeps its upstream error', async () => {
    const g = inProcess('mode: dry-run\nrate_limits: { base: 1/min }', {
      upstream: () => ({ status: 502, error: 'ECONNREFUSED' }),
    })
    const path = `/api-gateway/api/v2/dtables/${U}/metadata/`
    await g.call('GET', path)
    await g.call('GET', path)
    const line = g.lines.filter((l) => l.method === 'GET').at(-1)!
    expect(line).toMatchObject({
      outcome: 'upstream_error',
      upstream_error: 'ECONNREFUSED',
      dry_run: true,
      would_refuse: 'rate',
    })
    const text = await g.metrics.registry.metrics()
    expect(text).toContain('basegate_refusals_total{reason="dry_run"} 1')
    expect(text).toContain('outcome="upstream_error"')
  })

  it('a dry-run rule never refuses: the call is forwarded, logged with the rule, and charged to the enforced windows', async () => {
    const g = inProcess(
      `rate_limits:\n  base: 3/min\n  rules: [ { name: shadow, path: "/api-gateway/*", limits: 1/min, mode: dry-run } ]`
    )
    const path = `/api-gateway/api/v2/dtables/${U}/metadata/`
    const statuses = []
    for (let i = 0; i < 4; i++) statuses.push((await g.call('GET', path)).status)
    expect(statuses).toEqual([200, 200, 200, 429])
    const lines = g.lines.filter((l) => l.method === 'GET')
    expect(lines[1]).toMatchObject({ dry_run: true, rules: ['shadow'] })
    // The rule never shows in the headers: remaining follows the enforced 3/min window.
    expect(lines[1]!.remaining).toBe(1)
  })

  it('allow.bases and allow.clients: never limited, never charged, no headers, still logged', async () => {
    const g = inProcess(
      `rate_limits: { base: 1/min }\nallow: { bases: ["${U}"], clients: ["10.0.0.0/8"] }`
    )
    for (let i = 0; i < 3; i++) {
      const r = await g.call('GET', `/api-gateway/api/v2/dtables/${U}/rows/`)
      expect(r.status).toBe(200)
      expect(r.headers!['x-ratelimit-limit']).toBeUndefined()
    }
    const other = '11111111-0d3b-4c59-9a51-3e2d7c8b9a10'
    for (let i = 0; i < 3; i++)
      expect((await g.call('GET', `/api-gateway/api/v2/dtables/${other}/rows/`)).status).toBe(200)
    expect(g.lines.filter((l) => l.method === 'GET')).toHaveLength(6)
  })

  it('masks tokens carried in paths in the log line', async () => {
    const g = inProcess('{}')
    await g.call('GET', '/dtable/external-links/0123456789abcdef0123/')
    await g.call('GET', '/api/v2.1/external-link-tokens/secrettokenvalue/access-token/')
    const paths = g.lines.filter((l) => l.method === 'GET').map((l) => l.path)
    expect(paths).toEqual([
      '/dtable/external-links/0123…/',
      '/api/v2.1/external-link-tokens/secr…/access-token/',
    ])
  })
})
