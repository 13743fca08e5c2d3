import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { Pool } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { INSPECTABLE, liveHeapMb } from '../helpers/live-heap.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #33: 200,000 one-off bases in a minute (a client rotating base UUIDs) through a real
// gateway on a real redis-server: the process's memory does not grow with them (the day counts
// are held one interval at a time, at most 50,000 subjects, and written in pieces): its live
// heap, after a full collection (RSS on Node 24 follows V8's growth policy: helpers/live-heap.ts).
// Run by .ci/load (vitest.heavy.config.ts): it takes most of a minute of both cores.

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

describe('200,000 one-off bases in a minute (issue #33)', () => {
  let redis: TestRedis
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    redis = await startRedis()
    up = await startStubUpstream()
    gw = await startGateway(
      testYaml(up.url, `store: { url: "${redis.url}", prefix: "${redis.prefix}flood:" }`),
      { env: { LOG_LEVEL: 'info', ...INSPECTABLE } }
    )
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
    await redis?.stop()
  })

  it('memory does not grow with the bases (the second 100,000 add under 10 MB of live heap), and every base is counted', async () => {
    const pool = new Pool(gw.url, { connections: 64 })
    const call = async (i: number) => {
      const u = `${i.toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
      const r = await pool.request({
        path: `/api-gateway/api/v2/dtables/${u}/rows/`,
        method: 'GET',
      })
      await r.body.dump()
      return r.statusCode
    }
    await Promise.all(Array.from({ length: 2000 }, (_, i) => call(1_000_000 + i))) // warm-up
    const pid = gw.proc.pid!
    const before = rssMb(pid)
    const heapBefore = await liveHeapMb(gw)
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 250)
    const started = Date.now()
    let next = 0
    let ok = 0
    const N = 200_000
    let half = 0
    let heapHalf: Promise<number> = Promise.resolve(0)
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < N && Date.now() - started < 90_000) {
          if ((await call(next++)) === 200) ok++
          if (next === N / 2) {
            half = rssMb(pid)
            heapHalf = liveHeapMb(gw)
          }
        }
      })
    )
    const end = rssMb(pid)
    const heapEnd = await liveHeapMb(gw)
    clearInterval(sampler)
    await pool.close()
    const seconds = (Date.now() - started) / 1000
    process.stderr.write(
      `one-off bases: ${ok} calls in ${seconds.toFixed(1)} s; live heap ${heapBefore.toFixed(0)} MB before, ${(await heapHalf).toFixed(0)} MB after 100,000, ${heapEnd.toFixed(0)} MB after 200,000; RSS ${before.toFixed(0)}, ${half.toFixed(0)}, ${end.toFixed(0)} MB, ${peak.toFixed(0)} MB at the peak\n`
    )
    expect(ok).toBe(N)
    // Bounded, not growing with the bases: the second 100,000 add (almost) nothing to the first's.
    expect(heapEnd - (await heapHalf)).toBeLessThan(10)
    // And the whole: what a flood leaves held is an interval's counts, no more.
    expect(heapEnd - heapBefore).toBeLessThan(40)
    expect(gw.logs.filter((l) => String(l.msg).startsWith('usage day counts'))).toEqual([])
    // Every base counted, in the store: its month's hash has today's field.
    const day = new Date().toISOString().slice(8, 10)
    const someKey = `${redis.prefix}flood:{u:b:0000abcd0d3b4c599a513e2d7c8b9a10}:days:${new Date().toISOString().slice(0, 7)}`
    await new Promise((r) => setTimeout(r, 2500)) // the last interval written
    const admin = new Redis(redis.url)
    expect(await admin.hget(someKey, day)).toBe('1')
    admin.disconnect()
  }, 90_000)
})
