import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { startLive } from '../../helpers/live.js'
import { rowsPath, send, UUID } from '../../helpers/http.js'
import { useRedis } from '../../helpers/redis.js'
import { holds as until } from '../../helpers/until.js'

// Issue #23 / SPEC §9: protecting the server, against the real process and a server that
// records the calls it has in progress.

/** A server that holds every call until told to answer, and records what it had in progress. */
async function startHoldingServer() {
  const held: { req: IncomingMessage; res: ServerResponse }[] = []
  const order: string[] = []
  let inProgress = 0
  let peak = 0
  let status = 200
  let hold = true
  const answer = (res: ServerResponse) => {
    inProgress--
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end('{"rows":[]}')
  }
  const server: Server = createServer((req, res) => {
    req.resume()
    // basegate's own calls (the server's version, the start-up probe) are answered at once.
    if (/server-info|ping/.test(req.url!)) {
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end('{"version":"6.2.0"}')
    }
    order.push(req.url!)
    inProgress++
    peak = Math.max(peak, inProgress)
    if (hold) held.push({ req, res })
    else answer(res)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    order,
    held,
    get peak() {
      return peak
    },
    get inProgress() {
      return inProgress
    },
    /** Answers the oldest held call (or all of them). */
    release(all = false) {
      const n = all ? held.length : Math.min(1, held.length)
      for (const h of held.splice(0, n)) answer(h.res)
    },
    setHolding(on: boolean) {
      hold = on
    },
    setStatus(s: number) {
      status = s
    },
    close: () =>
      new Promise<void>((r) => {
        for (const h of held.splice(0)) h.res.destroy()
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}
type Holding = Awaited<ReturnType<typeof startHoldingServer>>

/**
 * A holding server and a basegate in front of it, for one describe block: `yaml()` adds to
 * the config; `holding: false` makes the server answer at once.
 */
function useHeldGateway(yaml: () => string, holding = true) {
  const t = {} as { up: Holding; gw: Gateway }
  beforeAll(async () => {
    t.up = await startHoldingServer()
    t.up.setHolding(holding)
    t.gw = await startLive(testYaml(t.up.url, yaml()))
  })
  afterAll(async () => {
    await t.gw?.stop()
    await t.up?.close()
  })
  return t
}

let lastWaiting = 0
/** Calls waiting for a slot, as /v1/protect says (polled by `until`). */
function waiting(gw: Gateway): number {
  void send(gw.adminPort, { path: '/v1/protect' }).then((a) => {
    const w = JSON.parse(a.body).waiting as Record<string, number>
    lastWaiting = Object.values(w).reduce((x, y) => x + y, 0)
  })
  return lastWaiting
}

const storeKinds = ['memory', 'redis'] as const

describe.each(storeKinds)('the in-flight ceiling, %s store', (kind) => {
  const db = useRedis()
  const t = useHeldGateway(() => {
    const store =
      kind === 'redis' ? `store: { url: "${db.redis.url}", prefix: "${db.redis.prefix}ceil:" }` : ''
    return `${store}\nrate_limits: { base: 20/min }\nprotect: { max_in_flight: 2, queue_ms: 300 }`
  })

  it('never lets a third call reach the server; the waiting ones get 503 with retry-after and are given back', async () => {
    const calls = Array.from({ length: 6 }, () => send(t.gw.port, { path: rowsPath() }))
    await until(() => t.up.held.length === 2)
    // The four waiting calls wait queue_ms, then are shed: the server never saw them.
    const shedAnswers = await Promise.all(calls.slice(2))
    t.up.release(true)
    const first = await Promise.all(calls.slice(0, 2))
    expect(first.map((a) => a.status)).toEqual([200, 200])
    expect(t.up.peak).toBe(2)
    expect(t.up.order.length).toBe(2)
    for (const a of shedAnswers) {
      expect(a.status).toBe(503)
      expect(JSON.parse(a.body).error_msg).toMatch(/busy/)
      expect(Number(a.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    }
    // Given back: 2 calls counted, so the next admitted one has 20 - 3 left (17), not 13.
    t.up.setHolding(false)
    const next = await send(t.gw.port, { path: rowsPath() })
    expect(next.status).toBe(200)
    expect(next.headers['x-ratelimit-remaining']).toBe('17')
    t.up.setHolding(true)
    const shedLine = await t.gw.waitForLog((l) => l.outcome === 'shed')
    expect(shedLine).toMatchObject({ level: 'warn', status: 503, class: 'base', given_back: true })
    // Seen: /metrics and /v1/protect.
    const metrics = (await send(t.gw.adminPort, { path: '/metrics' })).body
    expect(metrics).toContain('basegate_protect_ceiling 2')
    expect(metrics).toContain('basegate_protect_shed_total{class="base"} 4')
    const state = JSON.parse((await send(t.gw.adminPort, { path: '/v1/protect' })).body)
    expect(state).toMatchObject({ max_in_flight: 2, ceiling: 2, shed: { base: 4 } })
  })

  it('a client that leaves while queued frees its place at once and is given back', async () => {
    const remainingNow = async () => {
      t.up.setHolding(false)
      const a = await send(t.gw.port, { path: rowsPath('0b0e9c7a-7a7e-4bb0-8d2c-0c5f3d6e1a21') })
      t.up.setHolding(true)
      return Number(a.headers['x-ratelimit-remaining'])
    }
    const before = await remainingNow()
    const path = rowsPath('0b0e9c7a-7a7e-4bb0-8d2c-0c5f3d6e1a21')
    const a = send(t.gw.port, { path })
    const b = send(t.gw.port, { path })
    await until(() => t.up.held.length === 2)
    const leaving = request({ host: '127.0.0.1', port: t.gw.port, path, agent: false })
    leaving.on('error', () => {})
    leaving.end()
    await until(() => waiting(t.gw) === 1)
    leaving.destroy()
    await until(() => t.gw.logs.some((l) => l.outcome === 'client_aborted'))
    const waitingNow = JSON.parse((await send(t.gw.adminPort, { path: '/v1/protect' })).body)
    expect(waitingNow.in_flight.base).toBe(2)
    expect(waitingNow.waiting.base).toBe(0)
    t.up.release(true)
    await Promise.all([a, b])
    // before counted 1; a and b 2 more; the one that left was given back: 20 - 4 = 16.
    expect(before).toBe(19)
    expect(await remainingNow()).toBe(16)
  })
})

// The memory store's case runs in process (test/spine/protect.test.ts); here, Redis's.
describe.each(['redis'] as const)('charge.server_errors, %s store', (kind) => {
  const db = useRedis()
  let up: Holding
  const gws: Gateway[] = []
  beforeAll(async () => {
    up = await startHoldingServer()
    up.setHolding(false)
  })
  afterAll(async () => {
    for (const g of gws) await g.stop()
    await up?.close()
  })
  const start = async (serverErrors: boolean | null, prefix: string) => {
    const store =
      kind === 'redis'
        ? `store: { url: "${db.redis.url}", prefix: "${db.redis.prefix}${prefix}:" }`
        : ''
    const charge = serverErrors === null ? '' : `charge: { server_errors: ${serverErrors} }`
    const gw = await startLive(
      testYaml(
        up.url,
        `${store}\n${charge}\nrate_limits: { base: 3/min }
monthly: { enabled: true, plans: { small: { calls: 10 } }, teams: [ { id: t, plan: small, bases: ["${UUID}"] } ] }`
      )
    )
    gws.push(gw)
    return gw
  }

  it('false: three 500s are given back to the base window and the team month', async () => {
    const gw = await start(false, 'off')
    up.setStatus(500)
    for (let i = 0; i < 3; i++) expect((await send(gw.port, { path: rowsPath() })).status).toBe(500)
    up.setStatus(200)
    // The give-backs are batched: the next calls go once the store counts none of the three.
    await until(async () => {
      const u = JSON.parse((await send(gw.adminPort, { path: `/v1/usage/base/${UUID}` })).body)
      return u.monthly.used === 0 && u.windows.every((w: { used: number }) => w.used === 0)
    })
    const answers = []
    for (let i = 0; i < 3; i++) answers.push(await send(gw.port, { path: rowsPath() }))
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200])
    const served = (l: Record<string, unknown>) => l.msg === 'request' && l.status === 200
    await until(() => gw.logs.filter(served).length === 3)
    const lines = gw.logs.filter(served)
    // The month counted only the calls the server served.
    expect(lines.map((l) => l.used)).toEqual([1, 2, 3])
    const given = gw.logs.filter((l) => l.status === 500)
    expect(given.every((l) => l.given_back === true)).toBe(true)
  })

  it('by default a 500 is charged like any answer', async () => {
    const gw = await start(null, 'on')
    up.setStatus(500)
    for (let i = 0; i < 3; i++) await send(gw.port, { path: rowsPath() })
    up.setStatus(200)
    expect((await send(gw.port, { path: rowsPath() })).status).toBe(429)
  })
})

describe('max_in_flight: auto', () => {
  const t = useHeldGateway(
    () => 'rate_limits: { base: unlimited }\nprotect: { max_in_flight: auto, min_in_flight: 3 }',
    false
  )

  it('starts at min_in_flight and shows the ceiling and the measured times', async () => {
    const state = JSON.parse((await send(t.gw.adminPort, { path: '/v1/protect' })).body)
    expect(state).toMatchObject({ max_in_flight: 'auto', ceiling: 3 })
    // The times are measured over intervals of 250 ms: calls until one has ended.
    const protect = async () =>
      JSON.parse((await send(t.gw.adminPort, { path: '/v1/protect' })).body)
    await until(async () => {
      for (let i = 0; i < 10; i++) await send(t.gw.port, { path: rowsPath() })
      return (await protect()).recent_ms !== null
    })
    const after = await protect()
    expect(after.recent_ms).toBeGreaterThan(0)
    expect(after.unloaded_ms).toBeGreaterThan(0)
    expect(after.ceiling).toBeGreaterThanOrEqual(3)
  })
})
