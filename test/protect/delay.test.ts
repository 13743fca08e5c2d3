import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import type { GateResult, Refusal } from '../../src/http/call.js'
import { createDelayer, delayMsOf } from '../../src/protect/delay.js'
import { MAX_DELAYED_PER_KEY, Protector } from '../../src/protect/protector.js'
import { gateOf, requestOf } from '../helpers/gate.js'

// SPEC §9 delay_ms in one unit: which refusals wait, for how long, and the second check.

const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = `/api-gateway/api/v2/dtables/${A}/rows/`

async function refusalOf(g: ReturnType<typeof gateOf>): Promise<Refusal> {
  for (let i = 0; i < 100; i++) {
    const r: GateResult = await g.gate(requestOf('GET', rows))
    if (r.kind === 'refuse') return r
  }
  throw new Error('never refused')
}

function delayer(yaml: string) {
  const g = gateOf(yaml)
  const protector = new Protector(() => g.config.protect, 1, g.clock)
  const results: string[] = []
  const delayed = createDelayer({
    gate: g.gate,
    protector,
    clock: g.clock,
    onDelayed: (r) => results.push(r),
  })
  return { g, protector, delayed, results }
}

describe('delay_ms (SPEC §9)', () => {
  it('waits only where the windows admit again within delay_ms; a monthly refusal never waits', async () => {
    const g = gateOf('rate_limits: { base: 1/s }')
    const r = await refusalOf(g)
    const wait = delayMsOf(r, 2000)!
    expect(wait).toBeGreaterThan(900)
    expect(wait).toBeLessThanOrEqual(1021) // a second, its bucket, a millisecond past
    expect(delayMsOf(r, 500)).toBe(null)
    expect(delayMsOf(r, 0)).toBe(null)
    const m = gateOf(
      `monthly:\n  enabled: true\n  plans: { p: { calls: 1 } }\n  teams: [ { id: t, plan: p, bases: ["${A}"] } ]`
    )
    expect(delayMsOf(await refusalOf(m), 60_000)).toBe(null)
  })

  it('a delayed call waits on the clock, then is checked again and admitted', async () => {
    const { g, delayed, results, protector } = delayer('rate_limits: { base: 1/s }')
    const r = await refusalOf(g)
    const wait = delayMsOf(r, 2000)!
    let waited = -1
    const res = new EventEmitter()
    const p = delayed(requestOf('GET', rows), res, r, wait, (ms) => (waited = ms))
    g.clock.advance(wait - 1)
    await new Promise((r) => setImmediate(r))
    expect(waited).toBe(-1)
    g.clock.advance(1)
    const again = await p
    expect(again!.kind).toBe('pass')
    expect(waited).toBe(wait)
    expect(results).toEqual(['admitted'])
    expect(protector.state().delayed).toEqual({ admitted: 1, refused: 0 })
  })

  it('a client that leaves while it waits: null at once, no second check', async () => {
    const { g, delayed, results } = delayer('rate_limits: { base: 1/s }')
    const r = await refusalOf(g)
    const res = new EventEmitter()
    const p = delayed(requestOf('GET', rows), res, r, 1000, () => {})
    res.emit('close')
    expect(await p).toBe(null)
    expect(g.clock.timers).toBe(0)
    expect(results).toEqual([])
  })

  it(`past ${MAX_DELAYED_PER_KEY} waiting calls of a key, the refusal is answered as it is`, async () => {
    const { g, delayed, protector } = delayer('rate_limits: { base: 1/s }')
    const r = await refusalOf(g)
    const key = r.admission!.classification.key
    for (let i = 0; i < MAX_DELAYED_PER_KEY; i++) protector.startDelay(key)
    expect(await delayed(requestOf('GET', rows), new EventEmitter(), r, 1000, () => {})).toBe(r)
  })
})
