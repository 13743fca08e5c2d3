import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { createAdminApp } from '../../src/admin/routes.js'
import { ConfigHolder } from '../../src/config/holder.js'
import { parseConfig } from '../../src/config/load.js'
import type { LimiterStore } from '../../src/types.js'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { Metrics } from '../../src/observe/metrics.js'
import { MemoryChangeStore } from '../../src/config/changes.js'
import { storeOf } from '../helpers/stores.js'
import { systemClock } from '../../src/clock.js'
import { StatusRecorder } from '../../src/observe/status-recorder.js'

// createAdminApp through Hono's app.request(), as Hono's own middleware tests do.

const TOKEN = 's3cret'
const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

function app(opts: { storeUp?: boolean; onError?: 'open' | 'closed'; draining?: boolean } = {}) {
  const yaml = `admin: { token: ${TOKEN} }\nstore: { on_error: ${opts.onError ?? 'open'} }\nupstream: { url: "http://user:pw@127.0.0.1:8000" }\nmonthly: { enabled: true, teams: [ { id: acme, plan: plus, users: 2, bases: ["${A}"] } ] }`
  const r = parseConfig(yaml, {})
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  const holder = new ConfigHolder('unused.yaml', r.config, {})
  const store: LimiterStore = storeOf({
    ready: async () => opts.storeUp ?? true,
    close: async () => {},
  })
  return createAdminApp({
    holder,
    store,
    ledger: store,
    changes: new MemoryChangeStore(),
    metrics: new Metrics(),
    storeKind: 'redis',
    draining: () => opts.draining ?? false,
    reload: async () => ({ ok: true }),
    clock: systemClock,
  })
}

const auth = { authorization: `Bearer ${TOKEN}` }

describe('admin probes (SPEC §7)', () => {
  it('answer without the token and reveal nothing', async () => {
    const a = app()
    expect(await (await a.request('/healthz')).json()).toEqual({ status: 'ok' })
    const r = await a.request('/readyz')
    expect(r.status).toBe(200)
    expect(await r.json()).toEqual({ status: 'ready', store: 'up' })
    expect((await a.request('/v1/config')).status).toBe(401)
  })

  it.each([
    [{ storeUp: false, onError: 'open' as const }, 200, 'down'],
    [{ storeUp: false, onError: 'closed' as const }, 503, 'down'],
    [{ storeUp: true, draining: true }, 503, 'unknown'],
  ])('readyz %j → %i, store %s', async (opts, status, store) => {
    const r = await app(opts).request('/readyz')
    expect(r.status).toBe(status)
    expect((await r.json()).store).toBe(store)
  })
})

describe('admin hardening (issue #11)', () => {
  it('masks the upstream URL credentials in /v1/config', async () => {
    const body = await (await app().request('/v1/config', { headers: auth })).json()
    expect(body.upstream.url).not.toContain('pw')
    expect(JSON.stringify(body)).not.toContain(TOKEN)
  })

  it.each([
    [{ plan: '__proto__' }],
    [{ plan: 'constructor' }],
    [{ plan: 'toString' }],
    [{ users: 1e308 }],
    [{ bases: [A, A] }],
  ])('PUT /v1/teams refuses %j', async (body) => {
    const r = await app().request('/v1/teams/acme', {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    expect(r.status).toBe(400)
  })

  it('refuses an admin body over 1 MB with 413', async () => {
    const big = JSON.stringify({ bases: Array(60_000).fill(A) })
    const r = await app().request('/v1/teams/acme', {
      method: 'PUT',
      headers: {
        ...auth,
        'content-type': 'application/json',
        'content-length': String(big.length),
      },
      body: big,
    })
    expect(r.status).toBe(413)
  })

  // Issue #22: a 3 MB chunked body was read whole and answered "not valid JSON"; a 400,000-deep
  // one crashed the route (500).
  it('refuses a chunked admin body past 1 MB with 413, as it streams', async () => {
    const chunk = new TextEncoder().encode(' '.repeat(65_536))
    let sent = 0
    const body = new ReadableStream<Uint8Array>({
      pull(ctl) {
        if (sent++ >= 48) return ctl.close() // 3 MB
        ctl.enqueue(chunk)
      },
    })
    const r = await app().request('/v1/teams/acme', {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      body,
      duplex: 'half',
    } as RequestInit)
    expect(r.status).toBe(413)
    expect(sent).toBeLessThan(48)
  })

  it('refuses an 800 KB, 400,000-deep body with 400 naming the nesting', async () => {
    const deep = '['.repeat(400_000) + ']'.repeat(400_000)
    const r = await app().request('/v1/teams/acme', {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: deep,
    })
    expect(r.status).toBe(400)
    expect((await r.json()).error_msg).toContain('512')
  })

  it('a valid change answers the team with its new quota', async () => {
    const r = await app().request('/v1/teams/acme', {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"users":3}',
    })
    expect(await r.json()).toMatchObject({ id: 'acme', users: 3, quota: 30000, changed: true })
  })
})

// Issue #25: /v1/config answers in the file's own snake_case names, secrets masked.
describe('/v1/config in the file own names', () => {
  it('snake_case throughout, rates as written, the token and URL passwords masked', async () => {
    const body = await (await app().request('/v1/config', { headers: auth })).json()
    const text = JSON.stringify(body)
    expect(text).not.toMatch(/"[a-z]+[A-Z][A-Za-z]*":/) // no camelCase key anywhere
    expect(body.rate_limits.base).toEqual(['500/min'])
    expect(body.size_limits.buffer_bytes).toBe(268435456)
    expect(body.store.on_error).toBe('open')
    expect(body.admin.token).toBe('****')
    expect(body.monthly.plans.plus).toEqual({ calls_per_user: 10000 })
    expect(body.server.in_force).toBeNull()
  })
})

describe('the admin listener against browsers and rebinding (issue #39 item 5)', () => {
  const open = () => {
    const r = parseConfig('upstream: { url: "http://127.0.0.1:8000" }', {})
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    const mem = new MemoryStore()
    return createAdminApp({
      holder: new ConfigHolder('unused.yaml', r.config, {}),
      store: mem,
      ledger: mem,
      changes: new MemoryChangeStore(),
      metrics: new Metrics(),
      reload: async () => ({ ok: true }),
      clock: systemClock,
    })
  }

  it.each([
    ['127.0.0.1:9090', 200],
    ['localhost:9090', 200],
    ['[::1]:9090', 200],
    ['127.1.2.3', 200],
    ['evil.example:9090', 403],
    ['127.0.0.1.evil.example', 403],
    ['localhost.evil.example', 403],
  ])('without a token, Host %s → %i (DNS rebinding)', async (host, status) => {
    const r = await open().request('/v1/config', { headers: { host } })
    expect(r.status).toBe(status)
    if (status === 403) expect((await r.json()).error_msg).toMatch(/loopback host names/)
  })

  it('the probes answer any Host; with a token any Host is let through to the token check', async () => {
    expect((await open().request('/healthz', { headers: { host: 'evil.example' } })).status).toBe(
      200
    )
    expect(
      (await app().request('/v1/config', { headers: { host: 'evil.example', ...auth } })).status
    ).toBe(200)
  })

  it('a read a browser opens is challenged with Basic, a tool with Bearer', async () => {
    const nav = await app().request('/v1/usage/export', {
      headers: { 'sec-fetch-mode': 'navigate', accept: 'text/html' },
    })
    expect(nav.status).toBe(401)
    expect(nav.headers.get('www-authenticate')).toMatch(/^Basic realm="basegate"/)
    const tool = await app().request('/v1/config')
    expect(tool.headers.get('www-authenticate')).toBe('Bearer')
    // Basic with the token as its password reads as Bearer does.
    const basic = `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`
    expect((await app().request('/v1/config', { headers: { authorization: basic } })).status).toBe(
      200
    )
  })

  it('the status page runs only its own script and style (admitted by hash, no unsafe-inline) and cannot be framed', async () => {
    const r = parseConfig('upstream: { url: "http://127.0.0.1:8000" }', {})
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    const recorder = new StatusRecorder()
    const a = createAdminApp({
      holder: new ConfigHolder('unused.yaml', r.config, {}),
      ...storeAndLedger(new MemoryStore()),
      changes: new MemoryChangeStore(),
      metrics: new Metrics(),
      reload: async () => ({ ok: true }),
      clock: systemClock,
      status: { counts: async () => recorder.counts(Date.now()), version: 'test', startedMs: 0 },
    })
    const page = await a.request('/')
    const csp = page.headers.get('content-security-policy')!
    expect(csp).not.toContain('unsafe-inline')
    expect(csp).toContain("frame-ancestors 'none'")
    expect(page.headers.get('x-frame-options')).toBe('DENY')
    expect(page.headers.get('x-content-type-options')).toBe('nosniff')
    const html = await page.text()
    expect(html).not.toMatch(/ style="| on[a-z]+="/)
    // Exactly its one script and one style, by their hashes.
    const body = (tag: string) => new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(html)![1]!
    const hash = (t: string) => `'sha256-${createHash('sha256').update(t).digest('base64')}'`
    expect(csp).toContain(`script-src ${hash(body('script'))};`)
    expect(csp).toContain(`style-src ${hash(body('style'))};`)
    expect(html.match(/<script/g)).toHaveLength(1)
  })

  it('a store password given as ?password= is masked in /v1/config', async () => {
    const r = parseConfig(
      'store: { url: "redis://127.0.0.1:6379/0?password=hunter2&db=0" }\nupstream: { url: "http://127.0.0.1:8000/?token=abc" }',
      {}
    )
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    const a = createAdminApp({
      holder: new ConfigHolder('unused.yaml', r.config, {}),
      ...storeAndLedger(new MemoryStore()),
      changes: new MemoryChangeStore(),
      metrics: new Metrics(),
      reload: async () => ({ ok: true }),
      clock: systemClock,
    })
    const text = await (await a.request('/v1/config')).text()
    expect(text).not.toContain('hunter2')
    expect(text).not.toContain('abc')
    expect(text).toContain('password=****')
  })
})

/** One memory store as both seams, as basegate runs without Redis. */
function storeAndLedger(m: MemoryStore) {
  return { store: m, ledger: m }
}
