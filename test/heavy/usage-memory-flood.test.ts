import { readFileSync } from 'node:fs'
import { Pool } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { INSPECTABLE, liveHeapMb } from '../helpers/live-heap.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #40 item 5: the in-memory usage store (the default deployment) kept every base for
// good: +84 MB of heap per 100,000 one-off bases. 300,000 one-off bases through a real gateway
// with no store.url: it keeps at most 50,000, forgets the stalest, says so in a metric, and its
// memory stops growing (its live heap, after a full collection: RSS on Node 24 follows V8's
// growth policy, see helpers/live-heap.ts). Run by .ci/load (vitest.heavy.config.ts).

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

describe('300,000 one-off bases on the in-memory store (issue #40 item 5)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(testYaml(up.url, 'rate_limits: { base: unlimited }'), {
      env: { LOG_LEVEL: 'info', BASEGATE_USAGE_FLUSH_MS: '1000', ...INSPECTABLE },
    })
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('keeps at most 50,000 bases: the last 150,000 add under 10 MB of live heap, and what it forgot is counted', async () => {
    const pool = new Pool(gw.url, { connections: 64 })
    const call = async (i: number) => {
      const u = `${i.toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
      const r = await pool.request({
        path: `/api-gateway/api/v2/dtables/${u}/rows/`,
        method: 'GET',
      })
      await r.body.dump()
    }
    const pid = gw.proc.pid!
    const burst = async (from: number, n: number) => {
      for (let i = 0; i < n; i += 2000)
        await Promise.all(Array.from({ length: 2000 }, (_, k) => call(from + i + k)))
    }
    const rss: number[] = []
    const heap: number[] = []
    for (let k = 0; k < 6; k++) {
      await burst(k * 50_000, 50_000)
      await new Promise((r) => setTimeout(r, 1500)) // the last counts written to the store
      rss.push(rssMb(pid))
      heap.push(await liveHeapMb(gw))
    }
    // By 100,000 bases both bounds are reached (50,000 bases; 100,000 key-days of shapes).
    const half = heap[2]!
    const end = heap[5]!
    await pool.close()
    const metrics = await (await fetch(`${gw.adminUrl}/metrics`)).text()
    const forgotten = Number(/^basegate_usage_bases_forgotten_total (\d+)/m.exec(metrics)![1])
    console.log(
      `memory usage store: every 50,000 bases, live heap ${heap.map((x) => x.toFixed(0)).join(', ')} MB, RSS ${rss.map((x) => x.toFixed(0)).join(', ')} MB; ${forgotten} forgotten`
    )
    expect(forgotten).toBe(300_000 - 50_000)
    expect(end - half).toBeLessThan(10)
    // What is held at the bounds: 50,000 bases' days and 100,000 key-days of shapes (~35 MB).
    expect(end).toBeLessThan(120)
  }, 240_000)
})
