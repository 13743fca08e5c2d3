import { EventEmitter } from 'node:events'
import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createGateway } from '../../src/app.js'
import { systemClock } from '../../src/clock.js'
import { parseConfig } from '../../src/config/load.js'
import { compileSnapshot } from '../../src/http/snapshot.js'
import type { ForwardRequest, Forwarder } from '../../src/http/proxy.js'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { createLogger } from '../../src/observe/log.js'
import { Metrics } from '../../src/observe/metrics.js'

// createGateway in process: the memory store, a fake clock, a stub forwarder, and a logger
// writing into an array. Sharper and faster than a spawned process for the request path.

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

function setup(
  yaml: string,
  upstream: (f: ForwardRequest) => { status: number; error?: string } = () => ({ status: 200 })
) {
  const r = parseConfig(yaml, {})
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  const snap = compileSnapshot(r.config)
  const lines: Record<string, unknown>[] = []
  const sink = new Writable({
    write(chunk, _e, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l))
      cb()
    },
  })
  const logger = createLogger({ level: 'debug', destination: sink })
  const forwarded: ForwardRequest[] = []
  const forwarder: Forwarder = {
    forward(f) {
      forwarded.push(f)
      const a = upstream(f)
      for (const [k, v] of Object.entries(f.extraHeaders ?? {})) f.res.setHeader(k, v as string)
      if (!a.error) f.res.writeHead(a.status).end('{}')
      else f.res.writeHead(502).end()
      f.done({ status: a.status, upstreamMs: 1, error: a.error, bytesOut: a.error ? 0 : 2 })
    },
    close: async () => {},
    destroy: async () => {},
  }
  let clock = Date.parse('2026-11-23T10:00:00Z')
  const metrics = new Metrics()
  const gw = createGateway({
    snapshot: () => snap,
    store: new MemoryStore(),
    forwarder,
    logger,
    upstreamUrl: 'http://127.0.0.1:1',
    metrics,
    clock: { ...systemClock, now: () => clock },
  })
  async function call(
    method: string,
    url: string,
    headers: Record<string, string> = {},
    extraRaw: string[] = []
  ) {
    const socket = new Socket()
    Object.defineProperty(socket, 'remoteAddress', { value: '10.0.0.1' })
    const req = new IncomingMessage(socket)
    req.method = method
    req.url = url
    req.headers = { host: 'gw', ...headers }
    req.rawHeaders = [...(Object.entries(req.headers).flat() as string[]), ...extraRaw]
    const res = new ServerResponse(req)
    const out: {
      status?: number
      headers?: Record<string, unknown>
      body: string
      /** Answered before handleRequest returned: no promise, no event-loop turn (issue #26). */
      sync?: boolean
    } = { body: '' }
    let returned = false
    let written: Record<string, unknown> = {}
    const origHead = res.writeHead.bind(res)
    res.writeHead = ((status: number, headers?: Record<string, unknown>) => {
      written = { ...res.getHeaders(), ...headers }
      return origHead(status, headers as never)
    }) as typeof res.writeHead
    const done = new Promise<void>((resolve) => {
      const origEnd = res.end.bind(res)
      res.end = ((chunk?: unknown) => {
        out.status = res.statusCode
        out.sync = !returned
        out.headers = { ...res.getHeaders(), ...written }
        if (typeof chunk === 'string') out.body = chunk
        resolve()
        return origEnd()
      }) as typeof res.end
    })
    req.push(null)
    gw.handleRequest(req, res)
    returned = true
    await done
    await new Promise((r) => setImmediate(r))
    return out
  }
  return { call, lines, forwarded, metrics, advance: (ms: number) => (clock += ms) }
}

describe('createGateway in process', () => {
  it('admits to the limit, then answers a bare 429 with retry-after; one log line per request', async () => {
    const g = setup('rate_limits: { base: 2/min }')
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
    const g = setup('rate_limits: { base: 1/min }')
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
    const g = setup('{}')
    expect((await g.call('GET', '/a/%2F/b')).status).toBe(400)
    expect((await g.call('GET', '/x', { host: 'a' })).status).toBe(200)
    expect(g.lines.find((l) => l.outcome === 'bad_path')).toMatchObject({
      status: 400,
      class: 'unknown',
    })
  })

  it('dry-run: a call over the limit whose upstream then fails keeps its upstream error', async () => {
    const g = setup('mode: dry-run\nrate_limits: { base: 1/min }', () => ({
      status: 502,
      error: 'ECONNREFUSED',
    }))
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
    const g = setup(
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
    const g = setup(
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
    const g = setup('{}')
    await g.call('GET', '/dtable/external-links/0123456789abcdef0123/')
    await g.call('GET', '/api/v2.1/external-link-tokens/secrettokenvalue/access-token/')
    const paths = g.lines.filter((l) => l.method === 'GET').map((l) => l.path)
    expect(paths).toEqual([
      '/dtable/external-links/0123…/',
      '/api/v2.1/external-link-tokens/secr…/access-token/',
    ])
  })
})

// keep EventEmitter referenced for older Node typings of Socket
void EventEmitter
