import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #15's latency claim, out of `npm test` (issue #42: a timed assertion belongs where the
// machine is not also running the rest of the suite): while ten 16 MiB bodies are counted and
// held, other calls are answered within 250 ms at the median and 1 s at worst (it waited 1.8 s
// before issue #15, when a body was parsed whole). Run by .ci/load, alone.

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const rowsPath = `/api-gateway/api/v2/dtables/${U}/rows/`

function postBig(port: number): Promise<number> {
  return new Promise((resolve) => {
    const row = Buffer.from(`{"Name":"${'x'.repeat(18_600)}"},`)
    const req = request(
      {
        port,
        method: 'POST',
        path: rowsPath,
        headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      }
    )
    req.on('error', () => resolve(-1))
    req.write('{"table_name":"T","rows":[')
    let i = 0
    const pump = (): void => {
      while (i < 899) {
        i++
        if (!req.write(row)) return void req.once('drain', pump)
      }
      req.end('{}]}')
    }
    pump()
  })
}

describe('other calls while ten 16 MiB bodies are held (issue #15)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    up.handle((req, res) => {
      req.resume()
      req.on('end', () => res.end('{}'))
    })
    gw = await startGateway(testYaml(up.url, 'rate_limits: { base: unlimited }'))
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('are answered within 250 ms at the median, 1 s at worst', async () => {
    const latencies: number[] = []
    let running = true
    const probe = (async () => {
      while (running) {
        const t0 = performance.now()
        await send(gw.port, { path: `/api-gateway/api/v2/dtables/${U}/metadata/` })
        latencies.push(performance.now() - t0)
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    const statuses = await Promise.all(Array.from({ length: 10 }, () => postBig(gw.port)))
    running = false
    await probe
    expect(statuses).toEqual(Array(10).fill(200))
    latencies.sort((a, b) => a - b)
    const median = latencies[Math.floor(latencies.length / 2)]!
    console.log(
      `held bodies: ${latencies.length} calls beside them, median ${median.toFixed(1)} ms, worst ${latencies.at(-1)!.toFixed(1)} ms`
    )
    expect(median).toBeLessThan(250)
    expect(latencies.at(-1)!).toBeLessThan(1000)
  }, 60_000)
})
