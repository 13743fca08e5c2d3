import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket, { WebSocketServer } from 'ws'
import { startGateway, testYaml } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { holds } from '../helpers/until.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

// A rolling restart: one of two instances gets SIGTERM while it serves; nothing it accepted
// is lost, and clients move to the other one.

let redis: TestRedis
let reached = 0 // calls that reached the upstream (each held 300 ms)
const upstream = createServer((req, res) => {
  reached++
  setTimeout(() => res.end(`done ${req.url}`), 300)
})
const wss = new WebSocketServer({ server: upstream, path: '/socket.io/' })
wss.on('connection', (ws) => ws.on('message', (m) => ws.send(`echo:${m.toString()}`)))

beforeAll(async () => {
  redis = await startRedis()
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
})
afterAll(async () => {
  wss.close()
  upstream.close()
  await redis?.stop()
})

describe('graceful restart (SIGTERM)', () => {
  it('one of two instances stops: every accepted request completes, new ones go to the other', async () => {
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
    const yaml = testYaml(url, `store: { url: "${redis.url}", prefix: "${redis.prefix}" }`)
    const a = await startGateway(yaml)
    const b = await startGateway(yaml)
    try {
      // A client that tries A, and B when A no longer accepts connections.
      const call = async (i: number) => {
        try {
          return await send(a.port, { path: `/api2/repos/?i=${i}` })
        } catch {
          return await send(b.port, { path: `/api2/repos/?i=${i}` })
        }
      }
      const before = reached
      const inflight = Array.from({ length: 20 }, (_, i) => call(i))
      // All 20 accepted by A and at the upstream (a busy machine may have answered the first).
      await holds(() => reached >= before + 20)
      const exit = a.stop('SIGTERM')
      await holds(async () => (await send(a.adminPort, { path: '/readyz' })).status === 503)
      // Draining: the proxy port takes no new connection, the admin listener still answers.
      expect((await send(a.adminPort, { path: '/healthz' })).status).toBe(200)
      // SPEC §7: not ready while draining, so the orchestrator stops sending traffic here.
      const ready = await send(a.adminPort, { path: '/readyz' })
      expect(ready.status).toBe(503)
      expect(JSON.parse(ready.body).status).toBe('draining')
      const later = Array.from({ length: 20 }, (_, i) => call(100 + i))
      const answers = await Promise.all([...inflight, ...later])
      expect(answers.map((x) => x.status)).toEqual(Array(40).fill(200))
      expect(answers.every((x, i) => x.body === `done /api2/repos/?i=${i < 20 ? i : 80 + i}`)).toBe(
        true
      )
      expect(await exit).toBe(0)
      const stopped = a.logs.find((l) => l.msg === 'stopped')
      expect(stopped).toBeDefined()
    } finally {
      await a.stop()
      await b.stop()
    }
  }, 30_000)

  it('an open WebSocket may finish its work after SIGTERM (within 10 s), then the process exits 0', async () => {
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
    const g = await startGateway(testYaml(url))
    const ws = new WebSocket(`ws://127.0.0.1:${g.port}/socket.io/`)
    await new Promise((r) => ws.on('open', r))
    const exit = g.stop('SIGTERM')
    await holds(async () => (await send(g.adminPort, { path: '/readyz' })).status === 503)
    const reply = await new Promise<string>((resolve) => {
      ws.once('message', (m) => resolve(m.toString()))
      ws.send('still here')
    })
    expect(reply).toBe('echo:still here')
    ws.close()
    const t0 = Date.now()
    expect(await exit).toBe(0)
    expect(Date.now() - t0).toBeLessThan(5000)
  }, 30_000)
})
