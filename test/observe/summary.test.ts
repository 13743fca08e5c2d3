import { FakeClock } from '../helpers/clock.js'
import { describe, expect, it } from 'vitest'
import { UsageSummary } from '../../src/observe/summary.js'

describe('UsageSummary across worker processes', () => {
  it('take() hands over the counts and starts afresh; absorb() adds them up', () => {
    const a = new UsageSummary(new FakeClock(0))
    const b = new UsageSummary(new FakeClock(0))
    for (let i = 0; i < 3; i++) a.record('base:x')
    a.record('base:y')
    for (let i = 0; i < 2; i++) b.record('base:y')
    b.record('base:z')
    a.recordMonthly('acme', 90, 100)
    b.recordMonthly('acme', 95, 100)
    const primary = new UsageSummary(new FakeClock(0), 10, 100_000)
    primary.absorb(a.take())
    primary.absorb(b.take())
    const line = primary.flush(60_000)
    expect(line.requests).toBe(7)
    expect(line.busiest).toEqual([
      { key: 'base:x', calls: 3 },
      { key: 'base:y', calls: 3 },
      { key: 'base:z', calls: 1 },
    ])
    // A team's usage is the highest any process saw (they read one store).
    expect(line.teams_over_80).toEqual([{ team: 'acme', used: 95, quota: 100, percent: 95 }])
    // Issue #34: a team shows in the interval it had calls in; after take() nothing is left.
    expect(a.take()).toEqual({ requests: 0, calls: [], teams: [] })
  })
})

describe('UsageSummary: a used-up team with no traffic (issue #34 item 7)', () => {
  it('shows in the interval it had calls in, not again in every quiet interval after', () => {
    const s = new UsageSummary(new FakeClock(0), 10, 100_000)
    s.record('base:a')
    s.recordMonthly('acme', 100, 100)
    expect(s.flush(60_000).teams_over_100).toEqual([
      { team: 'acme', used: 100, quota: 100, percent: 100 },
    ])
    expect(s.flush(120_000).teams_over_100).toEqual([])
  })
})
