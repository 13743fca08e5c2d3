import { request, Agent } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { INSPECTABLE, liveHeapMb } from '../helpers/live-heap.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'
import { holds } from '../helpers/until.js'

// SPEC §4 "nothing a stranger sends outlives its window", SPEC §12's memos: what the gateway
// works out once per path (its normal form, class, size check, history, route family) is kept
// for short paths only. 0.7.7 kept 15 KB made-up paths too: 4,000 of them held 63 MiB after a
// full collection (8,000, about 120 MiB) until the maps filled and started again.

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

describe('long made-up paths are not kept', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(testYaml(up.url, 'rate_limits: { base: unlimited }'), {
      env: INSPECTABLE,
    })
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('2,000 GETs of distinct 15 KB paths: the live heap grows by under 8 MB', async () => {
    const before = await liveHeapMb(gw)
    const agent = new Agent({ keepAlive: true, maxSockets: 16 })
    let next = 0
    let ok = 0
    const worker = async () => {
      while (next < 2000) {
        const n = next++
        const junk = `${n.toString(36)}-${'x'.repeat(15_000)}`
        await new Promise<void>((resolve) => {
          request(
            { port: gw.port, agent, path: `/api-gateway/api/v2/dtables/${U}/rows/${junk}/` },
            (res) => {
              if (res.statusCode === 200) ok++
              res.resume()
              res.on('end', () => resolve())
            }
          )
            .on('error', () => resolve())
            .end()
        })
      }
    }
    await Promise.all(Array.from({ length: 16 }, worker))
    agent.destroy()
    expect(ok).toBe(2000)
    // Every request line read: the heap is not the log reader's backlog.
    await holds(() => gw.logs.filter((l) => l.msg === 'request').length >= 2000, 30_000)
    // 0.7.7: about 30 MB (one copy of each path).
    expect((await liveHeapMb(gw)) - before).toBeLessThan(8)
  }, 60_000)
})
