import { describe, expect, it } from 'vitest'
import { systemClock, type Clock } from '../../src/clock.js'
import { FakeClock } from '../helpers/clock.js'
import { InFlightSlots, type SlotWait } from '../../src/protect/slots.js'
import type { QueuedClass } from '../../src/types.js'

const ORDER: QueuedClass[] = ['other', 'auth_token', 'account', 'base']

function slots(ceiling: number, maxWaiting = 100, clock: Clock = systemClock) {
  let c = ceiling
  const s = new InFlightSlots({
    ceiling: () => c,
    priority: () => ORDER,
    maxWaiting: () => maxWaiting,
    clock,
  })
  return { s, setCeiling: (n: number) => (c = n) }
}

const tick = () => new Promise((r) => setImmediate(r))

describe('the in-flight ceiling (SPEC §9)', () => {
  it('never lets more than the ceiling hold a slot; a release serves the next waiter', async () => {
    const { s } = slots(2)
    expect(s.tryTake('base')).toBe(true)
    expect(s.tryTake('base')).toBe(true)
    expect(s.tryTake('base')).toBe(false)
    const w = s.wait('base', 10_000)
    let got: SlotWait | null = null
    void w.result.then((r) => (got = r))
    await tick()
    expect(got).toBe(null)
    expect([s.inFlight, s.waiting]).toEqual([2, 1])
    s.release('base')
    await tick()
    expect(got).toBe('granted')
    expect([s.inFlight, s.waiting]).toEqual([2, 0])
  })

  it('serves the oldest waiter of the first class in priority: the web UI before three API calls', async () => {
    const { s } = slots(1)
    expect(s.tryTake('base')).toBe(true)
    const served: string[] = []
    const wait = (cls: QueuedClass, name: string) =>
      void s.wait(cls, 10_000).result.then((r) => r === 'granted' && served.push(name))
    wait('base', 'api-1')
    wait('base', 'api-2')
    wait('account', 'account-1')
    wait('other', 'web-ui')
    for (let i = 0; i < 4; i++) {
      s.release(s.inFlightOf('base') > 0 ? 'base' : s.inFlightOf('other') > 0 ? 'other' : 'account')
      await tick()
    }
    expect(served).toEqual(['web-ui', 'account-1', 'api-1', 'api-2'])
  })

  it('sheds a waiter after its queue time, and a cancelled one frees its place at once', async () => {
    // On the fake clock: shed at its queue time, not a moment before (no wall-clock bound).
    const clock = new FakeClock(Date.UTC(2026, 10, 28))
    const { s } = slots(1, 100, clock)
    s.tryTake('base')
    let settled: string | null = null
    const first = s.wait('base', 50)
    void first.result.then((r) => (settled = r))
    clock.advance(49)
    await tick()
    expect(settled).toBeNull()
    clock.advance(1)
    expect(await first.result).toBe('shed')
    const w = s.wait('base', 10_000)
    expect(s.waiting).toBe(1)
    w.cancel()
    expect(await w.result).toBe('cancelled')
    expect(s.waiting).toBe(0)
    // The cancelled waiter never takes the slot a release frees.
    s.release('base')
    expect(s.inFlight).toBe(0)
  })

  it('bounds the queue: past it the newest waiter of a lower class makes room, else the arrival is shed', async () => {
    const { s } = slots(1, 2)
    s.tryTake('base')
    const a = s.wait('base', 10_000)
    const b = s.wait('base', 10_000)
    // Full: another bulk call is shed at once.
    expect(await s.wait('base', 10_000).result).toBe('shed')
    // A web-UI call takes the place of the newest bulk waiter.
    const ui = s.wait('other', 10_000)
    expect(await b.result).toBe('shed')
    s.release('base')
    expect(await ui.result).toBe('granted')
    s.release('other')
    expect(await a.result).toBe('granted')
  })

  it('hands out the slots a raised ceiling frees', async () => {
    const { s, setCeiling } = slots(1)
    s.tryTake('base')
    const w = s.wait('base', 10_000)
    setCeiling(2)
    s.drain()
    expect(await w.result).toBe('granted')
    expect(s.inFlight).toBe(2)
  })
})
