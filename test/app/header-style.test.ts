import { decodeList } from 'structured-field-values'
import { describe, expect, it } from 'vitest'
import { inProcess, BASE as U } from '../helpers/in-process.js'

// SPEC §10 / issue #24: header_style, through the gateway's own answer (in process: the fields'
// arithmetic is tested in test/http/ietf-headers.test.ts). Parsed with a structured-field
// parser, checked against x-ratelimit-* of the same call; the monthly policy; a 429's
// retry-after is never earlier than the refusing policy's t.

const rows = `/api-gateway/api/v2/dtables/${U}/rows/`
type Params = Record<string, number>
const read = (v: unknown) =>
  new Map(
    (decodeList(String(v)) as unknown as { value: string; params: Params }[]).map((i) => [
      i.value,
      i.params,
    ])
  )
const gateway = (style: string) =>
  inProcess(
    `header_style: ${style}\nrate_limits: { base: 3/min }\nmonthly: { enabled: true, teams: [ { id: acme, plan: free, users: 1, bases: ["${U}"] } ] }`
  )

describe('header_style', () => {
  it('both: the IETF fields agree with x-ratelimit-* of the same call, monthly policy included', async () => {
    const g = gateway('both')
    const a = await g.call('GET', rows)
    expect(a.status).toBe(200)
    const h = a.headers!
    const policy = read(h['ratelimit-policy'])
    const state = read(h['ratelimit'])
    expect(policy.get('base')).toEqual({ q: Number(h['x-ratelimit-limit']), w: 60 })
    expect(state.get('base')!.r).toBe(Number(h['x-ratelimit-remaining']))
    const t = state.get('base')!.t!
    const untilReset = Number(h['x-ratelimit-reset']) - Math.floor(g.clock.now() / 1000)
    expect(Math.abs(t - untilReset)).toBeLessThanOrEqual(1)
    expect(policy.get('monthly')!.q).toBe(3000) // the free plan
    expect(state.get('monthly')!.r).toBe(2999)
    expect(policy.get('monthly')!.w).toBeGreaterThanOrEqual(28 * 86_400)
  })

  it("ietf: no x-ratelimit-*; a 429's retry-after is never earlier than the refusing policy's t", async () => {
    const g = gateway('ietf')
    let last = await g.call('GET', rows)
    for (let i = 0; i < 4 && last.status !== 429; i++) last = await g.call('GET', rows)
    expect(last.status).toBe(429)
    const h = last.headers!
    expect(h['x-ratelimit-limit']).toBeUndefined()
    const state = read(h['ratelimit'])
    expect(state.get('base')!.r).toBe(0)
    expect(Number(h['retry-after'])).toBeGreaterThanOrEqual(state.get('base')!.t!)
  })
})
