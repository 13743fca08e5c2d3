import { Pool } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #47: the request lines go to a stdout pipe as a non-blocking stream on the loop's own
// thread (observe/log.ts). A reader that stops reading must never stall the gateway (a blocking
// write to a full pipe would), and what it held back is written once it reads again; a SIGTERM
// waits for the lines still queued before the process exits (SPEC §1).

describe('request lines to a stdout pipe whose reader stops (issue #47)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(testYaml(up.url, 'rate_limits: { base: unlimited }'), {
      env: { LOG_LEVEL: 'info' },
    })
  })
  afterAll(async () => {
    await up?.close()
  })

  it('3,000 calls are answered while nobody reads the log (about 1.5 MB of lines, far past a pipe’s 64 KiB); every line arrives once it reads, and the last before a SIGTERM', async () => {
    gw.proc.stdout!.pause()
    const pool = new Pool(gw.url, { connections: 20 })
    const N = 3000
    let ok = 0
    let next = 0
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < N) {
          const i = next++
          const r = await pool.request({
            method: 'GET',
            path: `/api-gateway/api/v2/dtables/${i.toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10/rows/`,
            headersTimeout: 5000,
          })
          await r.body.dump()
          if (r.statusCode === 200) ok++
        }
      })
    )
    await pool.close()
    expect(ok).toBe(N)
    gw.proc.stdout!.resume()
    await gw.waitForLog(() => gw.logs.filter((l) => l.msg === 'request').length >= N, 10_000)
    expect(gw.logs.filter((l) => l.msg === 'request').length).toBe(N)
    expect(await gw.stop()).toBe(0)
    expect(gw.logs.at(-1)?.msg).toBe('stopped')
  }, 30_000)
})
