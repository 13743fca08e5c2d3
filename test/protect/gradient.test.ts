import { describe, expect, it } from 'vitest'
import { AdaptiveCeiling, MAX_CEILING } from '../../src/protect/gradient.js'

/**
 * A simulated server that serves `capacity` calls at once, each `baseMs` alone; calls past
 * its capacity queue there, so a call's time grows with the calls in progress. The load is
 * closed: `clients` callers each send a call as soon as the last one came back, through the
 * ceiling. Advances simulated time in steps of 1 ms.
 */
function simulate(opts: { capacity: number; baseMs: number; clients: number; seconds: number }) {
  const ctl = new AdaptiveCeiling(4, 0)
  let inFlight = 0
  let peak = 0
  const calls: { doneAt: number; startedAt: number }[] = []
  const ceilings: number[] = []
  for (let t = 0; t < opts.seconds * 1000; t++) {
    for (let i = calls.length - 1; i >= 0; i--) {
      const c = calls[i]!
      if (c.doneAt > t) continue
      calls.splice(i, 1)
      inFlight--
      ctl.sample(c.doneAt - c.startedAt, t)
    }
    // Every client not at the server is waiting in basegate's queue: admit up to the ceiling.
    while (inFlight < Math.min(ctl.ceiling, opts.clients)) {
      inFlight++
      ctl.observeInFlight(inFlight)
      // Processor sharing past the capacity: a call takes baseMs × (in progress / capacity).
      const ms = opts.baseMs * Math.max(1, inFlight / opts.capacity)
      calls.push({ startedAt: t, doneAt: t + Math.ceil(ms) })
    }
    if (t > 10_000) {
      ceilings.push(ctl.ceiling)
      peak = Math.max(peak, inFlight)
    }
  }
  return { ctl, peak, ceilings }
}

describe('max_in_flight: auto (SPEC §9 gradient controller)', () => {
  it('keeps the server between its capacity and 1.5 × it under a flood, and knows the unloaded time', () => {
    for (const [capacity, baseMs] of [
      [10, 20],
      [40, 10],
      [4, 100],
    ] as const) {
      const { ctl, ceilings, peak } = simulate({ capacity, baseMs, clients: 400, seconds: 90 })
      const sorted = [...ceilings].sort((a, b) => a - b)
      // Most of the time at or above the capacity (a probe pins it low for a moment)…
      expect(sorted[Math.floor(sorted.length * 0.1)]!).toBeGreaterThanOrEqual(capacity)
      // …and never more than 1.5 × it at the server (a passive baseline drifted to 1.7 ×).
      expect(peak).toBeLessThanOrEqual(1.5 * capacity)
      expect(ctl.state().unloadedMs).toBe(baseMs)
    }
  })

  it('follows a server that gets slower: the ceiling drops with its capacity', () => {
    const fast = simulate({ capacity: 40, baseMs: 10, clients: 400, seconds: 40 })
    const slow = simulate({ capacity: 8, baseMs: 10, clients: 400, seconds: 40 })
    const median = (l: number[]) => [...l].sort((a, b) => a - b)[Math.floor(l.length / 2)]!
    expect(median(fast.ceilings)).toBeGreaterThan(3 * median(slow.ceilings))
  })

  it('is not raised while the calls never come near it, and stays within its bounds', () => {
    const idle = simulate({ capacity: 100, baseMs: 5, clients: 2, seconds: 20 })
    expect(idle.ctl.ceiling).toBeLessThanOrEqual(8)
    const ctl = new AdaptiveCeiling(4, 0)
    // Calls far slower than the unloaded time: never below min_in_flight.
    for (let t = 0; t < 5000; t++) ctl.sample(t < 1000 ? 5 : 500, t)
    expect(ctl.ceiling).toBe(4)
    // An everlasting fast, busy server: never past 1000.
    const busy = new AdaptiveCeiling(4, 0)
    for (let t = 0; t < 200_000; t += 5) {
      busy.observeInFlight(busy.ceiling)
      busy.sample(5, t)
    }
    expect(busy.ceiling).toBe(MAX_CEILING)
  })
})
