import { describe, expect, it } from 'vitest'
import { EPISODES, HealthMachine, type HealthView } from '../../src/observe/health.js'
import { StoreState } from '../../src/observe/store-state.js'
import { FakeClock } from '../helpers/clock.js'

// SPEC §7 "The server's and the store's state", on the fake clock: an episode starts on
// failures after the last recovery only, ends after RISE good calls, is told once each way,
// with its true length; the last EPISODES kept.

const T0 = Date.UTC(2026, 10, 28, 1, 0, 0)

function told() {
  const changes: { failing: boolean; view: HealthView }[] = []
  return {
    changes,
    onChange: (failing: boolean, view: HealthView) => changes.push({ failing, view }),
  }
}

describe('HealthMachine', () => {
  it('a 35.5 s outage under steady traffic (mixed answers at its end) is told once each way, with its length', () => {
    const t = told()
    const m = new HealthMachine({ share: true, onChange: t.onChange })
    let now = T0
    // 10 s of good calls, 20 a second.
    for (; now < T0 + 10_000; now += 50) m.seen(now, false)
    // 35.5 s of failures.
    const outage = now
    for (; now < outage + 35_500; now += 50) m.seen(now, true, '502')
    // The recovery: every call good but for one in five during its first 5 s.
    let i = 0
    for (; now < outage + 60_500; now += 50, i++)
      m.seen(now, now < outage + 40_500 && i % 5 === 4, '502')
    expect(t.changes.map((c) => c.failing)).toEqual([true, false])
    expect(t.changes[0]!.view.since_ms).toBe(outage)
    const last = m.view().last!
    expect(last.start_ms).toBe(outage)
    expect(last.lasted_s).toBeCloseTo(35.5, 0)
    expect(m.view().state).toBe('ok')
  })

  it('good calls right after a recovery never start an episode from the outage’s failures still in the window', () => {
    const t = told()
    const m = new HealthMachine({ share: true, onChange: t.onChange })
    let now = T0
    for (; now < T0 + 5_000; now += 100) m.seen(now, true, 'connect refused')
    // Two good calls end it; a stream of good calls then, with a lone failure now and then.
    for (let i = 0; i < 200; i++, now += 50)
      m.seen(now, i % 40 === 39, i % 40 === 39 ? '502' : null)
    expect(t.changes.map((c) => c.failing)).toEqual([true, false])
    expect(m.view().episodes).toHaveLength(1)
  })

  it('a new outage after a recovery is a new episode; the last EPISODES are kept, newest first', () => {
    const m = new HealthMachine()
    let now = T0
    for (let e = 0; e < EPISODES + 2; e++) {
      for (let i = 0; i < 3; i++) m.seen((now += 1000), true)
      for (let i = 0; i < 2; i++) m.seen((now += 1000), false)
    }
    const episodes = m.view().episodes
    expect(episodes).toHaveLength(EPISODES)
    expect(episodes[0]!.start_ms).toBeGreaterThan(episodes[1]!.start_ms)
    // Three failures a second apart, then the first good call 1 s later and the second 1 s on.
    expect(episodes[0]!.lasted_s).toBe(4)
  })

  it('runSince: the first of the failures in a row, null once a call answers', () => {
    const m = new HealthMachine()
    expect(m.runSince()).toBeNull()
    m.seen(T0, true)
    m.seen(T0 + 10, true)
    expect(m.runSince()).toBe(T0)
    expect(m.failing).toBe(false)
    m.seen(T0 + 20, false)
    expect(m.runSince()).toBeNull()
  })
})

describe('StoreState', () => {
  function state(probe: () => Promise<string | null>, clock: FakeClock) {
    const lines: string[] = []
    const logger = {
      warn: (_o: unknown, msg: string) => lines.push(msg),
      info: (_o: unknown, msg: string) => lines.push(msg),
    } as never
    const s = new StoreState({
      kind: 'redis',
      probe,
      clock,
      logger,
      address: 'redis://127.0.0.1:1',
      onError: () => 'open',
    })
    return { s, lines }
  }

  it('a check still out says since when it began, before the machine calls the store failing', async () => {
    const clock = new FakeClock(T0)
    let answer: ((v: string | null) => void) | null = null
    const { s } = state(() => new Promise((r) => (answer = r)), clock)
    expect(s.unansweredSince()).toBeNull()
    const pending = s.check()
    clock.advance(750)
    expect(s.up).toBe(true)
    expect(s.unansweredSince()).toBe(T0)
    answer!(null)
    expect(await pending).toBe(true)
    expect(s.unansweredSince()).toBeNull()
  })

  it('a store that refuses writes: since its first refusal, then failing after three, told once', async () => {
    const clock = new FakeClock(T0)
    const { s, lines } = state(async () => 'OOM command not allowed', clock)
    await s.check()
    clock.advance(5_000)
    expect(s.unansweredSince()).toBe(T0)
    await s.check()
    await s.check()
    expect(s.up).toBe(false)
    expect(s.view().since_ms).toBe(T0)
    expect(s.view().error).toBe('OOM command not allowed')
    expect(lines).toEqual(['store unavailable'])
  })
})
