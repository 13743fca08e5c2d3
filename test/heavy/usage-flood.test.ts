import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { Pool } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { INSPECTABLE, liveHeapMb } from '../helpers/live-heap.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #33: 200,000 one-off bases in a minute (a client rotating base UUIDs) through a real
// gateway on a real redis-server: the process's memory does not grow with them (SPEC §4: their
// calls count in one others count per class and day; what is tracked towards keep_after is
// bounded): its live heap, after a full collection (RSS on Node 24 follows V8's growth policy:
// helpers/live-heap.ts).
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

  it('memory does not grow with the bases (the second 100,000 add under 10 MB of live heap), and every call is counted (in others)', async () => {
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
    // Every call counted, in the store: today's others count of the base class, and no base's
    // own hash (SPEC §4: nothing a stranger sends outlives its window).
    const day = new Date().toISOString().slice(8, 10)
    const month = new Date().toISOString().slice(0, 7)
    const admin = new Redis(redis.url)
    const others = `${redis.prefix}flood:{u:o:base}:days:${month}`
    const deadline = Date.now() + 10_000
    // The flood's N and the warm-up's 2,000.
    while (Number(await admin.hget(others, day)) < N + 2000 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 200))
    expect(Number(await admin.hget(others, day))).toBe(N + 2000)
    const someBase = `${redis.prefix}flood:{u:b:0000abcd0d3b4c599a513e2d7c8b9a10}:days:${month}`
    expect(await admin.exists(someBase)).toBe(0)
    admin.disconnect()
  }, 90_000)
})
