import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { busiestWindow, hammer, stealDuring } from '../helpers/hammer.js'
import type { GatewayProcess } from '../helpers/gateway-process.js'
import { useInstances } from '../helpers/instances.js'
import { metricSum } from '../helpers/metrics.js'

const LIMIT = 20

// Issue #22 item 1: with the default store.timeout_ms (100 ms), load alone sent instances to
// their local fallback (a reply Redis sent in time counted as a timeout on a starved event
// loop), and the bound broke: up to 60 admitted in one second of Redis time against 20.
// It runs once in `npm test`, and `.ci/load` runs it ten times on every CI run.
describe('issue 22: load alone never sends an instance to its fallback', () => {
  const { gws } = useInstances({
    count: 3,
    yaml: (redis) =>
      `store: { url: "${redis.url}", prefix: "${redis.prefix}load:" }\nrate_limits: { base: ${LIMIT}/s }`,
    env: { LOG_LEVEL: 'info' },
  })

  it('3 instances, 300 calls in flight for 8 s: no fallback decision, no store error, the bound held', async () => {
    // A run during which the hypervisor stopped this machine for more than the store's timeout
    // is run again (at most twice): the machine stopped whole is not load (stealDuring). A run
    // with no such stop must show no fallback and no store error; any run with one and no stop
    // fails at once.
    for (let attempt = 1; ; attempt++) {
      const before = await Promise.all(gws.map(storeFailures))
      const { value: times, worstStealMs } = await stealDuring(() => loadBesideHogs())
      const after = await Promise.all(gws.map(storeFailures))
      const failed = after.some((a, i) => a.count > before[i]!.count)
      const stopped = worstStealMs !== null && worstStealMs >= STOPPED_MS
      if (failed && stopped && attempt < 3) {
        console.log(`store-load: the machine was stopped ${worstStealMs} ms (steal); run again`)
        continue
      }
      expect(times.length).toBeGreaterThan(3 * LIMIT)
      for (let i = 0; i < gws.length; i++) {
        const msg = `${after[i]!.said}; steal: ${worstStealMs} ms in the worst 300 ms`
        expect(after[i]!.fallbacks - before[i]!.fallbacks, msg).toBe(0)
        expect(after[i]!.errors - before[i]!.errors, msg).toBe(0)
      }
      expect(busiestWindow(times, 1000)).toBeLessThanOrEqual(LIMIT)
      return
    }
  }, 120_000)

  /** 300 calls in flight for 8 s, beside two busy processes (CI's box is shared). */
  async function loadBesideHogs(): Promise<number[]> {
    // Two busy processes take CPU from the gateways, so their event loops run late, as under
    // the load the issue measured.
    const hogs = [0, 1].map(() =>
      spawn(process.execPath, ['-e', 'const end = Date.now() + 9000; while (Date.now() < end) {}'])
    )
    try {
      return await hammer(gws, 8, 300)
    } finally {
      for (const h of hogs) h.kill('SIGKILL')
    }
  }
})

/** Steal within 300 ms that stops the gateways past store.timeout_ms (100 ms), both CPUs. */
const STOPPED_MS = 2 * 100

/** An instance's fallback decisions and store errors so far, and what it said of its store. */
async function storeFailures(g: GatewayProcess) {
  const text = await (await fetch(`${g.adminUrl}/metrics`)).text()
  const fallbacks = metricSum(text, 'basegate_store_fallback_decisions_total')
  const errors = metricSum(text, 'basegate_store_errors_total')
  const said = g.logs
    .filter((l) => typeof l.msg === 'string' && /store/i.test(l.msg) && l.level !== 'info')
    .map((l) => JSON.stringify(l))
    .slice(-5)
    .join('\n')
  return { fallbacks, errors, count: fallbacks + errors, said }
}
