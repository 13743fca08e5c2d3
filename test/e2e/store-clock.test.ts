import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { Agent, request } from 'undici'
import type { GatewayProcess } from '../helpers/gateway-process.js'
import { useInstances } from '../helpers/instances.js'

// Issue #11 (finding 2): over-admission across instances. Three instances on one Redis, a
// base at 20/s, 150 calls in flight for a few seconds: every admission's time on the store's
// clock (the request line's store_ms) is recorded, and no 1,000 ms window may hold more than
// 20 of them. With each instance bucketing on its own clock (the behaviour before the fix, which
// lives on only in test/helpers/caller-clock.ts) the same run admits more than the limit.

const LIMIT = 20
const U = 'cccccccc-0d3b-4c59-9a51-3e2d7c8b9a10'

/** The most admissions inside any window of `ms` (sorted times). */
export function busiestWindow(times: number[], ms: number): number {
  const t = [...times].sort((a, b) => a - b)
  let best = 0
  let lo = 0
  for (let hi = 0; hi < t.length; hi++) {
    while (t[hi]! - t[lo]! >= ms) lo++
    best = Math.max(best, hi - lo + 1)
  }
  return best
}

export async function hammer(
  gws: GatewayProcess[],
  seconds: number,
  inFlight: number
): Promise<number[]> {
  const agent = new Agent({ connections: inFlight })
  const deadline = Date.now() + seconds * 1000
  let n = 0
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (Date.now() < deadline && n < 200_000) {
        const g = gws[n++ % gws.length]!
        const r = await request(`${g.url}/api-gateway/api/v2/dtables/${U}/rows/`, {
          dispatcher: agent,
        })
        await r.body.dump()
      }
    })
  )
  await agent.close()
  await new Promise((r) => setTimeout(r, 300)) // the last log lines
  return gws.flatMap((g) =>
    g.logs
      .filter((l) => l.status === 200 && typeof l.store_ms === 'number')
      .map((l) => l.store_ms as number)
  )
}

describe("three instances, one Redis: the bound holds on the store's clock (issue #11)", () => {
  const { gws } = useInstances({
    count: 3,
    yaml: (redis) =>
      `store: { url: "${redis.url}", prefix: "${redis.prefix}clock:", timeout_ms: 2000 }\nrate_limits: { base: ${LIMIT}/s }`,
    env: { LOG_LEVEL: 'info' },
  })

  it('no 1,000 ms of store time holds more than the limit, under 150 calls in flight', async () => {
    const times = await hammer(gws, 8, 150)
    expect(times.length).toBeGreaterThan(3 * LIMIT) // the run spanned several windows
    expect(busiestWindow(times, 1000)).toBeLessThanOrEqual(LIMIT)
  }, 40_000)
})

// Issue #22 item 1: with the default store.timeout_ms (100 ms), load alone sent instances to
// their local fallback (a reply Redis sent in time counted as a timeout on a starved event
// loop), and the bound broke: up to 60 admitted in one second of Redis time against 20.
// `.ci/load` runs this ten times on every CI run.
describe('issue 22: load alone never sends an instance to its fallback', () => {
  const { gws } = useInstances({
    count: 3,
    yaml: (redis) =>
      `store: { url: "${redis.url}", prefix: "${redis.prefix}load:" }\nrate_limits: { base: ${LIMIT}/s }`,
    env: { LOG_LEVEL: 'info' },
  })

  it('3 instances, 300 calls in flight for 8 s: no fallback decision, no store error, the bound held', async () => {
    // The box is shared (as CI's is): two busy processes take CPU from the gateways, so their
    // event loops run late, as under the load the issue measured.
    const hogs = [0, 1].map(() =>
      spawn(process.execPath, ['-e', 'const end = Date.now() + 9000; while (Date.now() < end) {}'])
    )
    let times: number[]
    try {
      times = await hammer(gws, 8, 300)
    } finally {
      for (const h of hogs) h.kill('SIGKILL')
    }
    expect(times.length).toBeGreaterThan(3 * LIMIT)
    for (const g of gws) {
      const text = await (await fetch(`${g.adminUrl}/metrics`)).text()
      const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1])
      expect(value('basegate_store_fallback_decisions_total')).toBe(0)
      expect(value('basegate_store_errors_total')).toBe(0)
    }
    expect(busiestWindow(times, 1000)).toBeLessThanOrEqual(LIMIT)
  }, 40_000)
})
