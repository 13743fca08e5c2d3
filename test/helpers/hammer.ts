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
  return gws.flatMap((g) =>
    g.logs
      .filter((l) => l.status === 200 && typeof l.store_time === 'number')
      .map((l) => l.store_time as number)
  )
}
