import { describe, expect, it } from 'vitest'
import { MAX_DELAYED_PER_KEY, Protector, sumStates } from '../../src/protect/protector.js'
import type { SlotWait } from '../../src/protect/slots.js'
import type { ProtectConfig } from '../../src/types.js'
import { FakeClock } from '../helpers/clock.js'

// SPEC §9's one process, on the fake clock: the ceiling (shared by workers), its queue, the
// slot a ticket holds, one key's share and the calls waiting out a delay.

const tick = () => new Promise((r) => setImmediate(r))

function protector(over: Partial<ProtectConfig> = {}, processes = 1) {
  const config: ProtectConfig = {
    maxInFlight: 2,
    minInFlight: 1,
    queueMs: 1000,
    priority: ['other', 'auth_token', 'account', 'base'],
    keyInFlight: Infinity,
    ...over,
  }
  const clock = new FakeClock(0)
  return { p: new Protector(() => config, processes, clock), clock, config }
}

describe('Protector (SPEC §9)', () => {
  it('a fixed ceiling is shared by the processes, each holding at least one', () => {
    expect(protector({ maxInFlight: 10 }, 3).p.ceiling()).toBe(3)
    expect(protector({ maxInFlight: 2 }, 4).p.ceiling()).toBe(1)
    expect(protector({ maxInFlight: Infinity }).p.ceiling()).toBe(Infinity)
    expect(protector({ maxInFlight: Infinity }).p.limiting).toBe(false)
    expect(protector({ maxInFlight: 'auto', minInFlight: 4 }).p.ceiling()).toBeGreaterThanOrEqual(4)
  })

  it('a free slot is granted at once; exempt and unlimited calls never take one', () => {
    const { p } = protector({ maxInFlight: 1 })
    expect(p.slot('exempt').result).toBe('granted')
    const t = p.slot('base')
    expect(t.result).toBe('granted')
    expect(p.state().in_flight.base).toBe(1)
    expect(protector({ maxInFlight: Infinity }).p.slot('base').result).toBe('granted')
  })

  it('past the ceiling a call waits queue_ms and is shed (counted by class); a release before then grants it', async () => {
    const { p, clock } = protector({ maxInFlight: 1, queueMs: 1000 })
    const held = p.slot('base')
    const waiting = p.slot('base')
    let result: SlotWait | null = null
    void (waiting.result as Promise<SlotWait>).then((r) => (result = r))
    clock.advance(999)
    await tick()
    expect(result).toBe(null)
    expect(p.state().waiting.base).toBe(1)
    clock.advance(1)
    await tick()
    expect(result).toBe('shed')
    expect(p.state().shed.base).toBe(1)

    const next = p.slot('account')
    let got: SlotWait | null = null
    void (next.result as Promise<SlotWait>).then((r) => (got = r))
    held.release(12)
    await tick()
    expect(got).toBe('granted')
    expect(p.state().in_flight).toMatchObject({ base: 0, account: 1 })
  })

  it('a ticket frees its slot once, however often it is released; a shed one frees none', async () => {
    const { p, clock } = protector({ maxInFlight: 1, queueMs: 10 })
    const t = p.slot('base')
    const shed = p.slot('base')
    clock.advance(10)
    await tick()
    shed.release(null)
    expect(p.state().in_flight.base).toBe(1)
    t.release(null)
    t.release(null)
    expect(p.state().in_flight.base).toBe(0)
    expect(p.slot('base').result).toBe('granted')
    expect(p.slot('base').result).not.toBe('granted')
  })

  it('a cancelled wait (the client left) gives its place up at once', async () => {
    const { p } = protector({ maxInFlight: 1 })
    p.slot('base')
    const w = p.slot('base')
    expect(p.state().waiting.base).toBe(1)
    w.cancel()
    await tick()
    expect(p.state().waiting.base).toBe(0)
  })

  it('key_in_flight: a key holds at most its share; leaving frees it; refusals are counted; a reload applies to the next call', () => {
    const { p, config } = protector({ keyInFlight: 2 })
    expect(p.enterKey('base:a')).toBe(true)
    expect(p.enterKey('base:a')).toBe(true)
    expect(p.enterKey('base:a')).toBe(false)
    expect(p.enterKey('base:b')).toBe(true)
    p.leaveKey('base:a')
    expect(p.enterKey('base:a')).toBe(true)
    expect(p.state().key_refusals).toBe(1)
    config.keyInFlight = Infinity
    for (let i = 0; i < 10; i++) expect(p.enterKey('base:a')).toBe(true)
    expect(p.state().key_in_flight).toBe('unlimited')
  })

  it('delay_ms: at most MAX_DELAYED_PER_KEY calls of a key wait at once; each end is counted by what it said', () => {
    const { p } = protector()
    for (let i = 0; i < MAX_DELAYED_PER_KEY; i++) expect(p.startDelay('base:a')).toBe(true)
    expect(p.startDelay('base:a')).toBe(false)
    expect(p.startDelay('base:b')).toBe(true)
    p.endDelay('base:a', true)
    p.endDelay('base:a', false)
    p.endDelay('base:a', null) // the client left: neither
    expect(p.startDelay('base:a')).toBe(true)
    expect(p.state().delayed).toEqual({ admitted: 1, refused: 1 })
  })

  it('sumStates adds the workers up (latencies: the slowest)', () => {
    const a = protector({ maxInFlight: 4 }, 2).p
    const b = protector({ maxInFlight: 4 }, 2).p
    a.slot('base')
    b.slot('base')
    b.slot('account')
    const s = sumStates([a.state(), b.state()])!
    expect(s.ceiling).toBe(4)
    expect(s.in_flight).toMatchObject({ base: 2, account: 1 })
    expect(sumStates([])).toBe(null)
  })
})
