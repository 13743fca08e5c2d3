import { readFileSync } from 'node:fs'
import { Agent, request } from 'undici'
import type { GatewayProcess } from './gateway-process.js'
import { holds } from './until.js'

// Load on gateways sharing one store, and what the store's clock says was admitted.

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
  // Below listen.max_connections_per_client (256): calls pile up on whichever gateway runs
  // late, and a connection past the cap that sends nothing for 100 ms (this process's loop is
  // busy too) is closed unanswered, as SPEC §4 asks. The cap is not what these tests measure.
  const agent = new Agent({ connections: Math.min(inFlight, 200) })
  const deadline = Date.now() + seconds * 1000
  let n = 0
  const isCall = (l: Record<string, unknown>) => typeof l.status === 'number' && 'path' in l
  const lines = gws.map((g) => g.logs.filter(isCall).length)
  // The admissions of this run alone (a test may run the load more than once).
  const from = gws.map((g) => g.logs.length)
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (Date.now() < deadline && n < 200_000) {
        const at = n++ % gws.length
        const g = gws[at]!
        const r = await request(`${g.url}/api-gateway/api/v2/dtables/${U}/rows/`, {
          dispatcher: agent,
        })
        await r.body.dump()
        lines[at]!++
      }
    })
  )
  await agent.close()
  // Every answered call's line is in (a batch is written within a few milliseconds).
  await holds(() => gws.every((g, i) => g.logs.filter(isCall).length >= lines[i]!))
  return gws.flatMap((g, i) =>
    g.logs
      .slice(from[i])
      .filter((l) => l.status === 200 && typeof l.store_time === 'number')
      .map((l) => l.store_time as number)
  )
}

/**
 * What the hypervisor took from this machine while `run` ran: the most steal time (/proc/stat,
 * all CPUs, ms) inside any `spanMs` of it; null where /proc/stat cannot be read. A machine
 * stopped whole for longer than store.timeout_ms is a store that did not answer in time, which
 * no gateway can tell from an outage (Redis runs the call past its deadline): that is not load.
 */
export async function stealDuring<T>(
  run: () => Promise<T>,
  spanMs = 300
): Promise<{ value: T; worstStealMs: number | null }> {
  const samples: [number, number][] = []
  const sample = () => {
    const s = stolenMs()
    if (s !== null) samples.push([performance.now(), s])
  }
  sample()
  const timer = setInterval(sample, 20)
  try {
    const value = await run()
    sample()
    if (samples.length < 2) return { value, worstStealMs: null }
    let worst = 0
    let lo = 0
    for (let hi = 0; hi < samples.length; hi++) {
      while (samples[hi]![0] - samples[lo]![0] > spanMs) lo++
      // From the sample before the span: steal counted at its first sample happened inside it.
      worst = Math.max(worst, samples[hi]![1] - samples[Math.max(0, lo - 1)]![1])
    }
    return { value, worstStealMs: worst }
  } finally {
    clearInterval(timer)
  }
}

/** Steal time since boot, ms summed over CPUs (USER_HZ 100: a jiffy is 10 ms); null if unknown. */
function stolenMs(): number | null {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').slice(0, 200).split('\n')[0]!.trim().split(/\s+/)
    const steal = Number(cpu[8])
    return Number.isFinite(steal) ? steal * 10 : null
  } catch {
    return null
  }
}
