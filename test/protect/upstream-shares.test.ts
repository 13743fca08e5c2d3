import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import { keptOf, UpstreamShares, type ShareLimits } from '../../src/protect/upstream-shares.js'
import { FakeClock } from '../helpers/clock.js'

// SPEC §4 "The upstream pool", on a driven clock: one client's share, its calls waiting for its
// own, and the quarter of the pool kept for calls that stream no body.

function shares(limits: Partial<ShareLimits> = {}) {
  const clock = new FakeClock(0)
  const l: ShareLimits = { total: 16, perClient: 2, waitMs: 1000, ...limits }
  return { clock, s: new UpstreamShares(() => l, clock) }
}
const gone = () => new EventEmitter()

describe('UpstreamShares', () => {
  it('grants one client its share, and its next call waits for one of its own (never another client’s)', async () => {
    const { clock, s } = shares()
    expect(s.take('a', true, gone())).toBe('granted')
    expect(s.take('a', true, gone())).toBe('granted')
    const third = s.take('a', true, gone())
    expect(third).toBeInstanceOf(Promise)
    // Another client is served at once meanwhile.
    expect(s.take('b', false, gone())).toBe('granted')
    s.give('b') // b's freeing does not serve a: a is at its share
    expect(s.state()).toMatchObject({ in_use: 2, waiting: 1, clients_at_share: 1 })
    s.give('a')
    expect(await third).toBe('granted')
    expect(s.state()).toMatchObject({ in_use: 2, waiting: 0 })
    clock.advance(5000)
  })

  it('a wait ends in busy after waitMs, or cancelled when the client goes; none of them holds a share', async () => {
    const { clock, s } = shares()
    s.take('a', true, gone())
    s.take('a', true, gone())
    const late = s.take('a', true, gone()) as Promise<string>
    const client = gone()
    const left = s.take('a', true, client) as Promise<string>
    client.emit('close')
    expect(await left).toBe('cancelled')
    clock.advance(999)
    expect(s.state().waiting).toBe(1)
    clock.advance(1)
    expect(await late).toBe('busy')
    expect(s.state()).toMatchObject({ in_use: 2, waiting: 0, busy: 1 })
  })

  it('streamed bodies never take the kept quarter: many addresses dripping leave it to the others', () => {
    const { s } = shares({ total: 16, perClient: 2 })
    expect(keptOf({ total: 16, perClient: 2, waitMs: 0 })).toBe(4)
    let granted = 0
    for (let i = 0; i < 20; i++)
      for (let j = 0; j < 2; j++) if (s.take(`drip${i}`, true, gone()) === 'granted') granted++
    expect(granted).toBe(12)
    // Calls that stream no body (a GET, a body held whole) still find one.
    for (let i = 0; i < 4; i++) expect(s.take(`person${i}`, false, gone())).toBe('granted')
    expect(s.take('person9', false, gone())).toBeInstanceOf(Promise)
  })

  it('waitMs 0: a call past its share is busy at once', async () => {
    const { s } = shares({ waitMs: 0, perClient: 1 })
    s.take('a', false, gone())
    expect(await s.take('a', false, gone())).toBe('busy')
  })
})
