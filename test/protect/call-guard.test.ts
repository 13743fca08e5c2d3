import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import type { Admission, GateResult } from '../../src/http/call.js'
import { CallGuard } from '../../src/protect/call-guard.js'
import { Protector } from '../../src/protect/protector.js'
import { gateOf, requestOf } from '../helpers/gate.js'

// SPEC §9 on the request path, in one unit: the key's share and the slot, and the give-back of a
// call that never reached the server (or that the server failed), on the memory store.

const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = `/api-gateway/api/v2/dtables/${A}/rows/`

function guarded(yaml: string) {
  const g = gateOf(yaml)
  const protector = new Protector(() => g.config.protect, 1, g.clock)
  const errors: unknown[] = []
  const guard = new CallGuard({
    protector,
    store: g.store,
    clock: g.clock,
    onGiveBackError: (e) => errors.push(e),
  })
  const admit = async (url = rows): Promise<Admission> => {
    const r: GateResult = await g.gate(requestOf('GET', url))
    if (r.kind !== 'pass') throw new Error(`refused: ${r.status}`)
    return r.admission
  }
  const remaining = async () => {
    const r = await g.gate(requestOf('GET', rows))
    return r.kind === 'pass' ? 'admitted' : r.status
  }
  return { ...g, protector, guard, admit, remaining, errors }
}

describe('CallGuard (SPEC §9)', () => {
  it("key_in_flight: the second call of a busy key is given back and gets retry-after 1; the first's leave frees its place", async () => {
    const g = guarded('rate_limits: { base: 2/min }\nprotect: { key_in_flight: 1 }')
    const first = await g.admit()
    expect(g.guard.enterKey(first)).toBe(null)
    const second = await g.admit()
    const busy = await g.guard.enterKey(second)!
    expect(busy.givenBack).toBe(true)
    expect(busy.headers['retry-after']).toBe('1')
    // Given back: the window of 2 has room for one more call.
    expect(await g.remaining()).toBe('admitted')
    expect(await g.remaining()).toBe(429)
    g.guard.leaveKey(first)
    expect(g.protector.enterKey(first.classification.key)).toBe(true)
  })

  it('an exempt call never takes a key place', async () => {
    const g = guarded('protect: { key_in_flight: 1 }\nexempt: ["/ping/"]')
    const a = await g.admit('/ping/')
    expect(a.classification.cls).toBe('exempt')
    for (let i = 0; i < 3; i++) expect(g.guard.enterKey(a)).toBe(null)
  })

  it('a shed call is given back before its answer; a granted one is not', async () => {
    const g = guarded('rate_limits: { base: 2/min }\nprotect: { max_in_flight: 1, queue_ms: 100 }')
    const client = new EventEmitter()
    const first = await g.admit()
    const held = g.guard.slot(first, client)
    expect('result' in held && held.result).toBe('granted')
    const second = await g.admit()
    const waiting = g.guard.slot(second, client) as Promise<{
      result: string
      givenBack?: boolean
      waitedMs: number
    }>
    g.clock.advance(100)
    const shed = await waiting
    expect(shed).toMatchObject({ result: 'shed', givenBack: true, waitedMs: 100 })
    expect(await g.remaining()).toBe('admitted')
    expect(g.guard.shedHeaders(second, g.config)['retry-after']).toBe('1')
  })

  it('a client that leaves while it waits for a slot is cancelled and given back', async () => {
    const g = guarded(
      'rate_limits: { base: 2/min }\nprotect: { max_in_flight: 1, queue_ms: 10000 }'
    )
    const client = new EventEmitter()
    g.guard.slot(await g.admit(), client)
    const waiting = g.guard.slot(await g.admit(), client) as Promise<{ result: string }>
    client.emit('close')
    expect((await waiting).result).toBe('cancelled')
    expect(await g.remaining()).toBe('admitted')
  })

  it('charge.server_errors false gives back a 5xx, true keeps it; a 4xx is always kept', async () => {
    const off = guarded('rate_limits: { base: 2/min }\ncharge: { server_errors: false }')
    expect(off.guard.answered(await off.admit(), off.config, 502)).toBe(true)
    expect(off.guard.answered(await off.admit(), off.config, 404)).toBe(false)
    await new Promise((r) => setImmediate(r))
    // The 502 was given back, the 404 kept: one call of 2 left.
    expect(await off.remaining()).toBe('admitted')
    expect(await off.remaining()).toBe(429)
    const on = guarded('rate_limits: { base: 2/min }\ncharge: { server_errors: true }')
    expect(on.guard.answered(await on.admit(), on.config, 503)).toBe(false)
  })

  it('a give-back the store refuses is told, never thrown', async () => {
    const g = guarded('rate_limits: { base: 2/min }\nprotect: { key_in_flight: 1 }')
    g.store.giveBack = () => Promise.reject(new Error('store down'))
    const a = await g.admit()
    g.guard.enterKey(a)
    const busy = await g.guard.enterKey(await g.admit())!
    expect(busy.givenBack).toBe(true)
    expect(String(g.errors[0])).toMatch(/store down/)
  })
})
