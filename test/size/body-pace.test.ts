import { describe, expect, it } from 'vitest'
import { BodyPace, paced, TOO_SLOW } from '../../src/size/body-pace.js'
import { FakeClock } from '../helpers/clock.js'

// SPEC §4 min_body_rate on a driven clock: any 5 s after the first 5 s must carry rate × 5 bytes.

function watch(rate: number) {
  const clock = new FakeClock(0)
  let slowAt: number | null = null
  const setTimer = (fn: () => void, ms: number) => {
    const t = clock.setTimer(fn, ms)
    return () => t.cancel()
  }
  const pace = new BodyPace(
    rate,
    setTimer,
    () => (slowAt = clock.monotonic()),
    () => clock.monotonic()
  )
  return { clock, pace, slowAt: () => slowAt }
}

describe('BodyPace', () => {
  it('a body below the rate is judged first at 10 s (the window wholly after the first 5 s)', () => {
    const { clock, pace, slowAt } = watch(1000)
    for (let s = 0; s < 9; s++) {
      pace.add(10)
      clock.advance(1000)
    }
    expect(slowAt()).toBeNull()
    clock.advance(1000)
    expect(slowAt()).toBe(10_000)
  })

  it('a slow start is forgiven; a body that keeps the rate is never judged slow; one that stops is', () => {
    const { clock, pace, slowAt } = watch(1000)
    clock.advance(5000) // nothing for 5 s
    for (let s = 0; s < 30; s++) {
      pace.add(1000)
      clock.advance(1000)
    }
    expect(slowAt()).toBeNull()
    // It stops: the first window short of 5,000 bytes ends it.
    clock.advance(1000)
    expect(slowAt()).toBe(36_000)
  })

  it('seconds its reader held it back are not asked of the client (the server reads slowly)', () => {
    const { clock, pace, slowAt } = watch(1000)
    pace.hold(true)
    clock.advance(20_000)
    expect(slowAt()).toBeNull()
    pace.hold(false)
    // From here the client owes the rate for each second its reader asks.
    for (let s = 0; s < 10; s++) {
      pace.add(1000)
      clock.advance(1000)
    }
    expect(slowAt()).toBeNull()
    clock.advance(1000)
    expect(slowAt()).toBe(31_000)
  })

  it('stop() ends the watch; rate 0 watches nothing', () => {
    const a = watch(1000)
    a.pace.stop()
    a.clock.advance(60_000)
    expect(a.slowAt()).toBeNull()
    const b = watch(0)
    b.clock.advance(60_000)
    expect(b.slowAt()).toBeNull()
    expect(b.clock.timers).toBe(0)
  })
})

describe('paced', () => {
  it('passes the bytes through, and fails the stream with TOO_SLOW when the client stalls', async () => {
    const clock = new FakeClock(0)
    const setTimer = (fn: () => void, ms: number) => {
      const t = clock.setTimer(fn, ms)
      return () => t.cancel()
    }
    let release: () => void = () => {}
    async function* source(): AsyncGenerator<Buffer> {
      yield Buffer.from('ab')
      await new Promise<void>((r) => (release = r)) // the client stalls
      yield Buffer.from('cd')
    }
    const it = paced(source(), 100, setTimer, () => clock.monotonic())
    expect((await it.next()).value?.toString()).toBe('ab')
    const next = it.next()
    for (let s = 0; s < 10; s++) clock.advance(1000)
    await expect(next).rejects.toMatchObject({ code: TOO_SLOW })
    release()
  })
})
