import { decodeList } from 'structured-field-values'
import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { useLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { useRedis } from '../../helpers/redis.js'

// Issue #31 item 6 and issue #34 item 9: a 429 answered from the over-limit cache (no store
// call) knows only the window that refused. Its RateLimit field names that one policy, never
// the others as full and unused; its log line carries the team's true monthly count or none.

const U = '7a1b2c3d-0d3b-4c59-9a51-3e2d7c8b9a31'
const rows = `/api-gateway/api/v2/dtables/${U}/rows/`
type Params = Record<string, number>
const read = (v: string | string[] | undefined) =>
  new Map(
    (decodeList(String(v)) as unknown as { value: string; params: Params }[]).map((i) => [
      i.value,
      i.params,
    ])
  )

describe('a refusal from the over-limit cache says what it knows', () => {
  const db = useRedis()
  const live = useLive((up) =>
    testYaml(
      up.url,
      `header_style: both
store: { url: "${db.redis.url}", prefix: "${db.redis.prefix}cached:" }
rate_limits: { base: 3/min }
monthly: { enabled: true, teams: [ { id: acme, plan: free, users: 1, bases: ["${U}"] } ] }`
    )
  )

  it('RateLimit lists only the refusing window; the log line of a cached refusal has no made-up "used"', async () => {
    for (let i = 0; i < 3; i++) expect((await send(live.gw.port, { path: rows })).status).toBe(200)
    // The store's refusal: every window read.
    const fromStore = await send(live.gw.port, { path: rows })
    expect(fromStore.status).toBe(429)
    expect([...read(fromStore.headers['ratelimit']).keys()]).toEqual(['base', 'monthly'])
    expect(read(fromStore.headers['ratelimit']).get('monthly')!.r).toBe(2997)
    // The cache's refusals: only the window it knows is full.
    const cached = await send(live.gw.port, {
      path: rows,
      headers: { 'x-request-id': 'cached-refusal-1' },
    })
    expect(cached.status).toBe(429)
    const state = read(cached.headers['ratelimit'])
    expect([...state.keys()]).toEqual(['base'])
    expect(state.get('base')!.r).toBe(0)
    expect([...read(cached.headers['ratelimit-policy']).keys()]).toEqual(['base'])
    expect(cached.headers['x-ratelimit-remaining']).toBe('0')
    expect(Number(cached.headers['retry-after'])).toBeGreaterThanOrEqual(state.get('base')!.t!)

    const line = await live.gw.waitForLog((l) => l.request_id === 'cached-refusal-1')
    expect(line.status).toBe(429)
    expect(line.team).toBe('acme')
    expect(line.used).toBeUndefined()
    const storeLine = live.gw.logs.filter((l) => l.status === 429)[0]!
    expect(storeLine.used).toBe(3)
  })
})
