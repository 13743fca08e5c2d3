import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket, { WebSocketServer } from 'ws'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'

describe('WebSocket pass-through (the service real-time socket)', () => {
  let gw: GatewayProcess
  const server = createServer((_req, res) => res.end('http'))
  const wss = new WebSocketServer({ server, path: '/socket.io/' })
  const paths: string[] = []
  wss.on('connection', (ws, req) => {
    paths.push(req.url!)
    ws.on('message', (m) => ws.send(`echo:${m.toString()}`))
  })

  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    gw = await startGateway(
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
