import v8 from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { BodyPace, paced, TOO_SLOW } from '../../src/size/body-pace.js'
import { FakeClock } from '../helpers/clock.js'

// SPEC §4 min_body_rate on a driven clock: the average since the first byte, from its 10th second.

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
  it('a body below the rate is judged first at its 10th second after its first byte', () => {
    const { clock, pace, slowAt } = watch(1000)
    clock.advance(20_000) // a head and no byte: not watched here (body_timeout_ms bounds it)
    expect(slowAt()).toBeNull()
    expect(clock.timers).toBe(0)
    for (let s = 0; s < 9; s++) {
      pace.add(10)
      clock.advance(1000)
    }
    expect(slowAt()).toBeNull()
    clock.advance(1000)
    expect(slowAt()).toBe(30_000)
  })

  it('the average since the first byte: a burst then a pause passes while the average holds', () => {
    const { clock, pace, slowAt } = watch(1000)
    pace.add(30_000) // a phone's radio: 30 s of the rate at once
    clock.advance(29_000)
    expect(slowAt()).toBeNull()
    clock.advance(2000) // 31 s asked, 30,000 bytes sent: below the average
    expect(slowAt()).toBe(31_000)
  })

  it('a phone at 20 KiB/s against the default 8 KiB/s is never cut; one that stops is', () => {
    const { clock, pace, slowAt } = watch(8192)
    for (let s = 0; s < 60; s++) {
      pace.add(20 * 1024)
      clock.advance(1000)
    }
    expect(slowAt()).toBeNull()
    // It stops: cut when the average since its first byte falls under 8 KiB/s (at 150 s).
    clock.advance(89_000)
    expect(slowAt()).toBeNull()
    clock.advance(2000)
    expect(slowAt()).toBe(151_000)
  })

  it('seconds its reader held it back are not asked of the client (the server reads slowly)', () => {
    const { clock, pace, slowAt } = watch(1000)
    pace.add(1000)
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
    clock.advance(2000)
    expect(slowAt()).toBe(32_000)
  })

  it('stop() ends the watch; rate 0 watches nothing', () => {
    const a = watch(1000)
    a.pace.add(1)
    a.pace.stop()
    a.clock.advance(60_000)
    expect(a.slowAt()).toBeNull()
    const b = watch(0)
    b.pace.add(1)
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

  it('a chunk passed on is not kept: 64 MiB streamed, the chunks before the last are collected', async () => {
    // 0.7.7 raced every chunk against one promise that settles only when the body is too slow:
    // each race left a reaction on it holding the chunk, so an upload held all it had streamed.
    v8.setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const clock = new FakeClock(0)
    const setTimer = (fn: () => void, ms: number) => {
      const t = clock.setTimer(fn, ms)
      return () => t.cancel()
    }
    const gone = new Set<number>()
    const registry = new FinalizationRegistry<number>((i) => gone.add(i))
    async function* source() {
      for (let i = 0; i < 1024; i++) {
        const chunk = Buffer.alloc(64 * 1024, i)
        registry.register(chunk, i)
        yield chunk
      }
    }
    const it = paced(source(), 100, setTimer, () => clock.monotonic())
    let bytes = 0
    for (let i = 0; i < 1024; i++) bytes += (await it.next()).value!.length
    expect(bytes).toBe(64 * 1024 * 1024)
    for (let i = 0; i < 5 && gone.size < 1000; i++) {
      gc()
      await new Promise((r) => setTimeout(r, 10))
    }
    // Still mid-stream (the source has not ended): what passed must be free already.
    expect(gone.size).toBeGreaterThan(1000)
    await it.return(undefined)
  })
})
