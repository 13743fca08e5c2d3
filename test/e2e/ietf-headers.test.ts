import { decodeList } from 'structured-field-values'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// SPEC §10 / issue #24: header_style. Parsed with a structured-field parser, checked against
// x-ratelimit-* of the same call; the monthly policy; a 429's retry-after is never earlier
// than the refusing policy's t.

const U = '7a1b2c3d-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = `/api-gateway/api/v2/dtables/${U}/rows/`
type Params = Record<string, number>
const read = (v: string | string[] | undefined) =>
  new Map(
    (decodeList(String(v)) as unknown as { value: string; params: Params }[]).map((i) => [
      i.value,
      i.params,
    ])
  )

let up: StubUpstream
const gws: GatewayProcess[] = []
beforeAll(async () => {
  up = await startStubUpstream()
  const yaml = (style: string) =>
    testYaml(
      up.url,
      `header_style: ${style}\nrate_limits: { base: 3/min }\nmonthly: { enabled: true, teams: [ { id: acme, plan: free, users: 1, bases: ["${U}"] } ] }`
    )
  gws.push(await startGateway(yaml('both')), await startGateway(yaml('ietf')))
})
afterAll(async () => {
  await Promise.all(gws.map((g) => g.stop()))
  await up?.close()
})

describe('header_style', () => {
  it('both: the IETF fields agree with x-ratelimit-* of the same call, monthly policy included', async () => {
    const a = await send(gws[0]!.port, { path: rows })
    expect(a.status).toBe(200)
    const policy = read(a.headers['ratelimit-policy'])
    const state = read(a.headers['ratelimit'])
    expect(policy.get('base')).toEqual({ q: Number(a.headers['x-ratelimit-limit']), w: 60 })
    expect(state.get('base')!.r).toBe(Number(a.headers['x-ratelimit-remaining']))
    const t = state.get('base')!.t!
    const untilReset = Number(a.headers['x-ratelimit-reset']) - Math.floor(Date.now() / 1000)
    expect(Math.abs(t - untilReset)).toBeLessThanOrEqual(2)
    expect(policy.get('monthly')!.q).toBe(3000) // the free plan
    expect(state.get('monthly')!.r).toBe(2999)
    expect(policy.get('monthly')!.w).toBeGreaterThanOrEqual(28 * 86_400)
  })

  it("ietf: no x-ratelimit-*; a 429's retry-after is never earlier than the refusing policy's t", async () => {
    const g = gws[1]!
    let last = await send(g.port, { path: rows })
    for (let i = 0; i < 4 && last.status !== 429; i++) last = await send(g.port, { path: rows })
    expect(last.status).toBe(429)
    expect(last.headers['x-ratelimit-limit']).toBeUndefined()
    const state = read(last.headers['ratelimit'])
    expect(state.get('base')!.r).toBe(0)
    expect(Number(last.headers['retry-after'])).toBeGreaterThanOrEqual(state.get('base')!.t!)
  })
})
