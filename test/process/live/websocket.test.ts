import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket, { WebSocketServer } from 'ws'
import { testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { startLive } from '../../helpers/live.js'

describe('WebSocket pass-through (the service real-time socket)', () => {
  let gw: Gateway
  const server = createServer((_req, res) => res.end('http'))
  const wss = new WebSocketServer({ server, path: '/socket.io/' })
  const paths: string[] = []
  wss.on('connection', (ws, req) => {
    paths.push(req.url!)
    ws.on('message', (m) => ws.send(`echo:${m.toString()}`))
  })

  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    gw = await startLive(
      testYaml(
        `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        'rate_limits: { other: 3/min }'
      )
    )
  })
  afterAll(async () => {
    await gw?.stop()
    wss.close()
    server.close()
  })

  it('echoes messages both ways through basegate', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/socket.io/?EIO=4&transport=websocket`)
    const got: string[] = []
    await new Promise<void>((resolve, reject) => {
      ws.on('open', () => ws.send('hello'))
      ws.on('message', (m) => {
        got.push(m.toString())
        if (got.length === 1) ws.send('second')
        else resolve()
      })
      ws.on('error', reject)
    })
    ws.close()
    expect(got).toEqual(['echo:hello', 'echo:second'])
    expect(paths.at(-1)).toBe('/socket.io/?EIO=4&transport=websocket')
  })

  it("relays the upstream's answer when it declines an upgrade", async () => {
    // The upstream's WebSocket server serves /socket.io/ only; elsewhere it answers 400.
    const status = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/not-a-socket/`)
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode!))
      ws.on('open', () => resolve(101))
      ws.on('error', () => {})
    })
    expect(status).toBe(400)
  })

  it('rate-limits upgrade requests like any other call', async () => {
    // 3/min on the other class; the two tests before used two.
    const statuses: number[] = []
    for (let i = 0; i < 2; i++) {
      statuses.push(
        await new Promise<number>((resolve) => {
          const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/socket.io/`)
          ws.on('open', () => {
            ws.close()
            resolve(101)
          })
          ws.on('unexpected-response', (_req, res) => resolve(res.statusCode!))
          ws.on('error', () => {})
        })
      )
    }
    expect(statuses).toEqual([101, 429])
  })
})

// Issue #21: the upgrade path kept the history in the report but lost it from its log line and
// from basegate_api_change_calls_total.
describe('an upgrade to a changed endpoint carries its api_change (regression)', () => {
  let gw: Gateway
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(req.url?.startsWith('/server-info') ? '{"version":"5.1.0"}' : '{}')
  })
  const wss = new WebSocketServer({ server, path: '/dtable-server/socket.io/' })
  wss.on('connection', (ws) => ws.on('message', (m) => ws.send(m.toString())))

  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    gw = await startLive(
      testYaml(
        `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        'server: { version: "5.1" }'
      )
    )
  })
  afterAll(async () => {
    await gw?.stop()
    wss.close()
    server.close()
  })

  it("the pre-5.3 server's socket: the line says api_change and the metric counts it", async () => {
    const ws = new WebSocket(
      `ws://127.0.0.1:${gw.port}/dtable-server/socket.io/?EIO=4&transport=websocket`
    )
    await new Promise<void>((resolve, reject) => {
      ws.on('open', () => resolve())
      ws.on('error', reject)
    })
    ws.close()
    const line = await gw.waitForLog((l) => l.status === 101)
    expect(line.api_change).toBe('dtable-server-removed')
    const metrics = await (await fetch(`${gw.adminUrl}/metrics`)).text()
    expect(metrics).toMatch(/basegate_api_change_calls_total\{entry="dtable-server-removed"\} 1/)
  })
})

// SPEC §9: an upgrade holds a slot at the server only until its 101.
describe('WebSocket upgrades and the in-flight ceiling', () => {
  let gw: Gateway
  const server = createServer((_req, res) => res.end('http'))
  const wss = new WebSocketServer({ server, path: '/socket.io/' })
  wss.on('connection', (ws) => ws.on('message', (m) => ws.send(`echo:${m.toString()}`)))

  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    gw = await startLive(
      testYaml(
        `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        'server: { version: "6.2" }\nrate_limits: { other: 100/min }\nprotect: { max_in_flight: 1, queue_ms: 500 }'
      )
    )
  })
  afterAll(async () => {
    await gw?.stop()
    wss.close()
    server.close()
  })

  const open = (): Promise<WebSocket> =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/socket.io/?EIO=4&transport=websocket`)
      ws.on('open', () => resolve(ws))
      ws.on('unexpected-response', (_q, res) => reject(new Error(`status ${res.statusCode}`)))
      ws.on('error', reject)
    })

  it('an open tunnel holds no slot: a second one and a plain call go through at a ceiling of 1', async () => {
    const a = await open()
    const b = await open()
    const got = await new Promise<string>((resolve) => {
      b.on('message', (m) => resolve(m.toString()))
      b.send('hi')
    })
    expect(got).toBe('echo:hi')
    const state = await fetch(`http://127.0.0.1:${gw.adminPort}/v1/protect`).then((r) => r.json())
    expect(state.in_flight.other).toBe(0)
    expect((await fetch(`http://127.0.0.1:${gw.port}/workspace/1/`)).status).toBe(200)
    a.close()
    b.close()
  })
})
