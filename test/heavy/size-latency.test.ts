import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { reapWithTest } from '../helpers/reap.js'

// Issue #15's latency claim, out of `npm test` (issue #42: a timed assertion belongs where the
// machine is not also running the rest of the suite): while ten 16 MiB bodies are counted and
// held, other calls are answered within 250 ms at the median and 1 s at worst (it waited 1.8 s
// before issue #15, when a body was parsed whole). The calls timed are ones the gateway answers
// itself (a key over its limit: a 429 from the over-limit cache), so their time is the
// gateway's alone: the stub server reads the 160 MiB too, and on a slow machine its answer to a
// forwarded call waits behind them for a second or two (0.7.6, a machine 4× slower than usual:
// `upstream_ms` 855–1,168 of forwarded probes that took 857–1,169), which says nothing of the
// gateway. Run by .ci/load, alone.

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const rowsPath = `/api-gateway/api/v2/dtables/${U}/rows/`

/**
 * The ten 16 MiB bodies, sent by a process of their own (it prints their statuses as JSON): the
 * probe's time is then the gateway's, not that of a test process busy writing 160 MiB.
 */
const SENDER = `
const { request } = require('node:http')
const [port, path] = process.argv.slice(1)
const row = Buffer.from('{"Name":"' + 'x'.repeat(18_600) + '"},')
const postBig = () => new Promise((resolve) => {
  const req = request({ port: Number(port), method: 'POST', path,
    headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
    res.resume()
    res.on('end', () => resolve(res.statusCode ?? 0))
  })
  req.on('error', () => resolve(-1))
  req.write('{"table_name":"T","rows":[')
  let i = 0
  const pump = () => {
    while (i < 899) {
      i++
      if (!req.write(row)) return void req.once('drain', pump)
    }
    req.end('{}]}')
  }
  pump()
})
Promise.all(Array.from({ length: 10 }, postBig)).then((s) => process.stdout.write(JSON.stringify(s)))
`

function postTenBig(port: number): Promise<number[]> {
  const child = reapWithTest(
    spawn(process.execPath, ['-e', SENDER, String(port), rowsPath], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
  )
  let out = ''
  child.stdout!.on('data', (d: Buffer) => (out += d))
  return new Promise((resolve) => child.on('exit', () => resolve(JSON.parse(out || '[]'))))
}

describe('other calls while ten 16 MiB bodies are held (issue #15)', () => {
  let up: ChildProcess
  let gw: GatewayProcess
  beforeAll(async () => {
    // The server in a process of its own (the bench's upstream: it reads a body whole, then
    // answers), so the calls' time is the gateway's, not this process's, which also sends the
    // ten bodies.
    up = reapWithTest(
      spawn(
        process.execPath,
        [fileURLToPath(new URL('../../dist/bench/upstream.js', import.meta.url)), '0'],
        { stdio: ['ignore', 'pipe', 'inherit'] }
      )
    )
    const port = await new Promise<number>((resolve) =>
      up.stdout!.once('data', (d: Buffer) => resolve(JSON.parse(String(d)).listening as number))
    )
    gw = await startGateway(
      testYaml(`http://127.0.0.1:${port}`, 'rate_limits: { base: unlimited, account: 1/min }')
    )
  })
  afterAll(async () => {
    await gw?.stop()
    up?.kill()
  })

  it('are answered within 250 ms at the median, 1 s at worst', async () => {
    // The account's one call a minute, spent: every probe after it is the gateway's own 429.
    expect((await send(gw.port, { path: '/api/v2.1/user/' })).status).toBe(200)
    const latencies: number[] = []
    const probeStatuses = new Set<number>()
    let running = true
    const probe = (async () => {
      while (running) {
        const t0 = performance.now()
        probeStatuses.add((await send(gw.port, { path: '/api/v2.1/user/' })).status)
        latencies.push(performance.now() - t0)
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    const statuses = await postTenBig(gw.port)
    running = false
    await probe
    expect(statuses).toEqual(Array(10).fill(200))
    expect([...probeStatuses]).toEqual([429])
    latencies.sort((a, b) => a - b)
    const median = latencies[Math.floor(latencies.length / 2)]!
    console.log(
      `held bodies: ${latencies.length} calls beside them, median ${median.toFixed(1)} ms, worst ${latencies.at(-1)!.toFixed(1)} ms`
    )
    expect(median).toBeLessThan(250)
    expect(latencies.at(-1)!).toBeLessThan(1000)
  }, 60_000)
})
