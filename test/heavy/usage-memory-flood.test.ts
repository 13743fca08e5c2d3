import { readFileSync } from 'node:fs'
import { Pool } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { INSPECTABLE, liveHeapMb } from '../helpers/live-heap.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'
import { until } from '../helpers/until.js'

// Issue #40 item 5 and issue #46 item 4: the in-memory deployment (the default) under a flood
// of one-off bases. 300,000 of them through a real gateway with no store.url and the default
// limits: their day counts and evidence go to one others count per class and day (SPEC §4,
// usage.keep_after), and their rate windows stay within store.memory_keys (lowered here to
// 100,000: the idlest dropped and counted), so the live heap stops growing (after a full
// collection: RSS on Node 24 follows V8's growth policy, see helpers/live-heap.ts). Run by
// .ci/load (vitest.heavy.config.ts).

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

describe('300,000 one-off bases on the in-memory store (issues #40, #46)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(testYaml(up.url, 'store: { memory_keys: 100000 }'), {
      env: { LOG_LEVEL: 'info', BASEGATE_USAGE_FLUSH_MS: '1000', ...INSPECTABLE },
    })
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('keeps at most memory_keys windows and no base by name: past 200,000 (every bound reached) the last 100,000 add under 8 MB of live heap, and the windows dropped are counted', async () => {
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
    // The calls counted so far, as the usage export says them: every one-off base's calls go to
    // the base class's others count.
    const counted = async () => {
      const csv = await (await fetch(`${gw.adminUrl}/v1/usage/export?format=csv`)).text()
      let n = 0
      for (const line of csv.split('\n')) {
        const f = line.split(',')
        if (f[1] === 'others' && f[2] === 'base') n += Number(f[4])
      }
      return n
    }
    for (let k = 0; k < 6; k++) {
      await burst(k * 50_000, 50_000)
      // The last counts written to the store (a flush every second), then measured.
      await until('the burst counted', counted, (n) => n >= (k + 1) * 50_000, { timeoutMs: 30_000 })
      rss.push(rssMb(pid))
      heap.push(await liveHeapMb(gw))
    }
    // By 200,000 bases every bound is reached: the windows' (100,000) and the keep_after
    // counts' (usage/keep.ts: two generations of MAX_TRACKED keys, the older dropped when the
    // newer fills; between 100,000 and 200,000 one-off bases the second fills, ~9 MB, which a
    // measure from 150,000 took for growth). From there the heap must stay flat.
    const full = heap[3]!
    const end = heap[5]!
    await pool.close()
    const metrics = await (await fetch(`${gw.adminUrl}/metrics`)).text()
    const value = (name: string) =>
      Number(new RegExp(`^${name} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0)
    const dropped = value('basegate_store_memory_dropped_total')
    const forgotten = value('basegate_usage_bases_forgotten_total')
    console.log(
      `memory store: every 50,000 one-off bases, live heap ${heap.map((x) => x.toFixed(0)).join(', ')} MB, RSS ${rss.map((x) => x.toFixed(0)).join(', ')} MB; ${dropped} windows dropped, ${forgotten} bases' days forgotten`
    )
    // Their days are one others count: no base was kept by name, so none was forgotten.
    expect(forgotten).toBe(0)
    expect(dropped).toBeGreaterThan(0)
    expect(end - full).toBeLessThan(8)
    // What is held at the bound: 100,000 windows (~30 MB).
    expect(end).toBeLessThan(120)
  }, 240_000)
})
