import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import { keptOf, UpstreamShares, type ShareLimits } from '../../src/protect/upstream-shares.js'
import { FakeClock } from '../helpers/clock.js'

// SPEC §4 "The upstream pool", on a driven clock: one client's share, its calls waiting for its
// own, the last share of the pool kept for clients that hold none, and (SPEC §9) the first class
// of protect.priority served first among one client's waiting calls.

const PRIORITY = ['other', 'auth_token', 'account', 'base'] as const

function shares(limits: Partial<ShareLimits> = {}) {
  const clock = new FakeClock(0)
  const l: ShareLimits = { total: 16, perClient: 2, waitMs: 1000, priority: PRIORITY, ...limits }
  return { clock, s: new UpstreamShares(() => l, clock) }
}
const gone = () => new EventEmitter()

describe('UpstreamShares', () => {
  it('grants one client its share, and its next call waits for one of its own (never another client’s)', async () => {
    const { clock, s } = shares()
    expect(s.take('a', 'base', gone())).toBe('granted')
    expect(s.take('a', 'base', gone())).toBe('granted')
    const third = s.take('a', 'base', gone())
    expect(third).toBeInstanceOf(Promise)
    // Another client is served at once meanwhile.
    expect(s.take('b', 'base', gone())).toBe('granted')
    s.give('b') // b's freeing does not serve a: a is at its share
    expect(s.state()).toMatchObject({ in_use: 2, waiting: 1, clients_at_share: 1 })
    s.give('a')
    expect(await third).toBe('granted')
    expect(s.state()).toMatchObject({ in_use: 2, waiting: 0 })
    clock.advance(5000)
  })

  it('a wait ends after waitMs saying which bound (its own share), or cancelled when the client goes; none of them holds a share', async () => {
    const { clock, s } = shares()
    s.take('a', 'base', gone())
    s.take('a', 'base', gone())
    const late = s.take('a', 'base', gone()) as Promise<string>
    const client = gone()
    const left = s.take('a', 'base', client) as Promise<string>
    client.emit('close')
    expect(await left).toBe('cancelled')
    clock.advance(999)
    expect(s.state().waiting).toBe(1)
    clock.advance(1)
    expect(await late).toBe('own')
    expect(s.state()).toMatchObject({ in_use: 2, waiting: 0, busy: 1 })
  })

  it('the last share is kept for clients that hold none: however many addresses hold theirs, a newcomer is served', async () => {
    const { s, clock } = shares({ total: 16, perClient: 2 })
    expect(keptOf({ total: 16, perClient: 2 })).toBe(2)
    // Seven addresses hold their whole share: 14 of 16.
    for (let i = 0; i < 7; i++)
      for (let j = 0; j < 2; j++) expect(s.take(`holder${i}`, 'base', gone())).toBe('granted')
    // One more call of a holder does not take the kept part: it waits, its wait naming the pool.
    const more = s.take('holder0b', 'base', gone())
    expect(more).toBe('granted') // a new address holding none: served from the kept part
    const again = s.take('holder0b', 'base', gone()) as Promise<string>
    expect(again).toBeInstanceOf(Promise)
    // A person holding nothing is served too (the last connection of the kept part).
    expect(s.take('person', 'other', gone())).toBe('granted')
    expect(s.state().in_use).toBe(16)
    const late = s.take('person2', 'other', gone()) as Promise<string>
    clock.advance(1000)
    expect(await late).toBe('pool')
    expect(await again).toBe('pool')
  })

  it('SPEC §9 within one client: a free share goes to its web-UI call before its older API calls', async () => {
    const { s } = shares({ total: 16, perClient: 2 })
    s.take('office', 'base', gone())
    s.take('office', 'base', gone())
    const order: string[] = []
    const api = (s.take('office', 'base', gone()) as Promise<string>).then(() => order.push('api'))
    const ui = (s.take('office', 'other', gone()) as Promise<string>).then(() => order.push('ui'))
    s.give('office')
    await ui
    expect(order).toEqual(['ui'])
    s.give('office')
    await api
    expect(order).toEqual(['ui', 'api'])
  })

  it('waitMs 0: a call past its share gets its answer at once', async () => {
    const { s } = shares({ waitMs: 0, perClient: 1 })
    s.take('a', 'base', gone())
    expect(await s.take('a', 'base', gone())).toBe('own')
  })
})
