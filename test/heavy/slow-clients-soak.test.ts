import { spawn, type ChildProcess } from 'node:child_process'
import { request, type ClientRequest } from 'node:http'
import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type GatewayProcess } from '../helpers/gateway-process.js'
import { reapWithTest } from '../helpers/reap.js'

// Issue #39's soak (SPEC §4 "Slow and idle clients never take what others need"), extended by
// issue #46: a few dozen addresses hold every head, drip, idle connection, slow reader of a
// large answer and silent upload they can for a minute, replacing what basegate closes, and one
// more address floods one-off base keys, while a client that behaves calls on. Its p99 stays
// within 2 × its unloaded p99. Run by .ci/load (vitest.heavy.config.ts); bounded in count (24
// addresses × 68 connections at most, the flood 100 calls a second) and in time (60 s).
// The server and the client that behaves run in processes of their own: the times are the
// gateway's, not those of this process, whose loop carries the attack.

const ATTACKERS = 24
const HEADS = 20
const DRIPS = 10
const IDLE = 30
/** Slow readers of a 1 MiB answer, and uploads announcing 100 MB that send nothing. */
const READERS = 4
const SILENT = 4
const FLOOD_PER_S = 100
const SOAK_MS = 60_000
const U = (i: number) => `6f1c2a4e-0d3b-4c59-9a51-${i.toString(16).padStart(12, '0')}`

/** The server: 1 MiB for /media/big, else the body read whole and a small JSON answer. */
const SERVER = `
const { createServer } = require('node:http')
const BIG = Buffer.alloc(1024 * 1024, 7)
const server = createServer((req, res) => {
  if (req.url.startsWith('/media/big')) {
    res.writeHead(200, { 'content-length': BIG.length })
    return void res.end(BIG)
  }
  req.resume()
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{"success":true}')
  })
})
server.keepAliveTimeout = 65000
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ listening: server.address().port }) + '\\n'))
`

/**
 * The client that behaves: a GET, a checked append, an upload in turn, from its own address;
 * `count` calls, or (count 0) calls until `untilMs` (epoch), one every `pauseMs` after the last.
 * It prints its times in ms and the statuses that were not 200.
 */
const CLIENT = `
const { request } = require('node:http')
const [port, count, pauseMs, untilMs] = process.argv.slice(1).map(Number)
const U = (i) => '6f1c2a4e-0d3b-4c59-9a51-' + i.toString(16).padStart(12, '0')
function call(i) {
  const started = performance.now()
  const kind = i % 3
  const body = kind === 1 ? JSON.stringify({ table_name: 'T', rows: [{ Name: 'r' + i }] }) : kind === 2 ? 'x'.repeat(2000) : undefined
  const path = kind === 0 ? '/api/v2.1/user/' : kind === 1 ? '/api-gateway/api/v2/dtables/' + U(0xffff00 + (i % 50)) + '/rows/' : '/api/v2.1/dtable-asset/upload/v'
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, method: body === undefined ? 'GET' : 'POST', localAddress: '127.0.0.250', agent: false,
      headers: body === undefined ? {} : { 'content-type': 'application/json', 'content-length': body.length } },
      (res) => { res.resume(); res.on('end', () => resolve([performance.now() - started, res.statusCode])) })
    req.on('error', (e) => resolve([performance.now() - started, String(e.code)]))
    req.end(body)
  })
}
;(async () => {
  const times = [], bad = []
  for (let i = 0; count > 0 ? i < count : Date.now() < untilMs; i++) {
    const [ms, status] = await call(i)
    times.push(ms)
    if (status !== 200) bad.push(status)
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs))
  }
  process.stdout.write(JSON.stringify({ times, bad }))
})()
`

/** The client's calls (see CLIENT), in a process of its own. */
function behave(
  port: number,
  args: { count: number; pauseMs?: number; untilMs?: number }
): Promise<{ times: number[]; bad: unknown[] }> {
  const child = reapWithTest(
    spawn(
      process.execPath,
      [
        '-e',
        CLIENT,
        String(port),
        String(args.count),
        String(args.pauseMs ?? 0),
        String(args.untilMs ?? 0),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] }
    )
  )
  let out = ''
  child.stdout!.on('data', (d: Buffer) => (out += d))
  return new Promise((resolve) =>
    child.on('exit', () => resolve(JSON.parse(out || '{"times":[],"bad":["no output"]}')))
  )
}

const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!

describe('the mixed attack of slow and idle clients, for a minute (issue #39)', () => {
  let up: ChildProcess
  let gw: GatewayProcess
  beforeAll(async () => {
    up = reapWithTest(
      spawn(process.execPath, ['-e', SERVER], { stdio: ['ignore', 'pipe', 'inherit'] })
    )
    const upPort = await new Promise<number>((resolve) =>
      up.stdout!.once('data', (d: Buffer) => resolve(JSON.parse(String(d)).listening as number))
    )
    gw = await startGateway(
      `listen: { host: 127.0.0.1, port: 0 }\nadmin: { host: 127.0.0.1, port: 0 }\nupstream: { url: "http://127.0.0.1:${upPort}", max_connections: 64 }\nrate_limits: { base: unlimited, account: unlimited }\n`,
      { env: { LOG_LEVEL: 'info' } }
    )
  })
  afterAll(async () => {
    await gw?.stop()
    up?.kill()
  })

  it(
    'the client that behaves keeps its p99 within 2 × unloaded, and is never refused',
    async () => {
      // At the pace of the loaded calls below: the same client, without the attack.
      const unloaded = await behave(gw.port, { count: 300, pauseMs: 50 })
      expect(unloaded.bad).toEqual([])
      const base99 = p99(unloaded.times)

      const open = new Set<Socket | ClientRequest>()
      const end = Date.now() + SOAK_MS
      let opened = 0
      const keep = (make: () => Socket | ClientRequest) => {
        const again = () => {
          if (Date.now() > end) return
          const s = make()
          opened++
          open.add(s)
          s.once('close', () => {
            open.delete(s)
            setTimeout(again, 200) // replaced, as the attacker did
          })
        }
        again()
      }
      for (let a = 0; a < ATTACKERS; a++) {
        const localAddress = `127.0.1.${a + 1}`
        for (let h = 0; h < HEADS; h++)
          keep(() => {
            const r = request({
              host: '127.0.0.1',
              port: gw.port,
              localAddress,
              method: 'POST',
              path: `/api-gateway/api/v2/dtables/${U(a * 1000 + h)}/rows/`,
              agent: false,
              headers: { 'content-type': 'application/json', 'content-length': 16_777_216 },
            })
            r.on('error', () => {})
            r.on('response', (res) => res.resume())
            r.flushHeaders()
            return r
          })
        for (let d = 0; d < DRIPS; d++)
          keep(() => {
            const r = request({
              host: '127.0.0.1',
              port: gw.port,
              localAddress,
              method: 'POST',
              path: `/api/v2.1/dtable-asset/upload/${a}-${d}`,
              agent: false,
              headers: { 'transfer-encoding': 'chunked' },
            })
            r.on('error', () => {})
            r.on('response', (res) => res.resume())
            const t = setInterval(() => !r.destroyed && r.write('x'), 1000)
            r.once('close', () => clearInterval(t))
            r.flushHeaders()
            return r
          })
        for (let k = 0; k < IDLE; k++)
          keep(() => {
            const s = connect({ host: '127.0.0.1', port: gw.port, localAddress })
            s.on('error', () => {})
            s.resume()
            return s
          })
        // Issue #46: readers that take nothing of a large answer, and uploads that send no byte.
        for (let k = 0; k < READERS; k++)
          keep(() => {
            const s = connect({ host: '127.0.0.1', port: gw.port, localAddress })
            s.on('error', () => {})
            s.pause()
            s.write(`GET /media/big/${a}-${k} HTTP/1.1\r\nhost: x\r\n\r\n`)
            return s
          })
        for (let k = 0; k < SILENT; k++)
          keep(() => {
            const r = request({
              host: '127.0.0.1',
              port: gw.port,
              localAddress,
              method: 'POST',
              path: `/seafhttp/upload-api/${a}-${k}`,
              agent: false,
              headers: {
                'content-type': 'application/octet-stream',
                'content-length': 100_000_000,
              },
            })
            r.on('error', () => {})
            r.on('response', (res) => res.resume())
            r.flushHeaders()
            return r
          })
      }
      // Issue #46: one-off base keys from one more address, at FLOOD_PER_S.
      let flooded = 0
      const flood = setInterval(() => {
        if (Date.now() > end) return clearInterval(flood)
        for (let f = 0; f < FLOOD_PER_S / 10; f++) {
          const n = flooded++
          const r = request({
            host: '127.0.0.1',
            port: gw.port,
            localAddress: '127.0.2.1',
            agent: false,
            path: `/api-gateway/api/v2/dtables/${n.toString(16).padStart(8, '0')}-1111-4c59-9a51-3e2d7c8b9a10/rows/`,
          })
          r.on('error', () => {})
          r.on('response', (res) => res.resume())
          r.end()
        }
      }, 100)

      const { times: loaded, bad } = await behave(gw.port, { count: 0, pauseMs: 50, untilMs: end })
      expect(bad).toEqual([])
      clearInterval(flood)
      for (const s of open) s.destroy()
      const load99 = p99(loaded)
      console.log(
        `soak: ${opened} attack connections over ${SOAK_MS / 1000} s from ${ATTACKERS} addresses (heads, drips, idle, slow readers, silent uploads) and ${flooded} one-off keys; the client's p99 ${load99.toFixed(1)} ms loaded vs ${base99.toFixed(1)} ms unloaded (${(load99 / base99).toFixed(2)}×), ${loaded.length} calls, none refused`
      )
      expect(load99).toBeLessThanOrEqual(2 * base99)
    },
    SOAK_MS + 60_000
  )
})
