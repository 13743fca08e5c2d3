import { describe, expect, it } from 'vitest'
import { LineBatch } from '../../src/observe/line-batch.js'
import { FakeClock } from '../helpers/clock.js'

function recorder() {
  const writes: string[] = []
  let flushed = 0
  return {
    writes,
    flushed: () => flushed,
    sink: {
      write: (s: string) => void writes.push(s),
      flush: (cb?: () => void) => {
        flushed++
        cb?.()
      },
    },
  }
}

const LINGER = 5

describe('LineBatch (issues #26, #47: a few milliseconds of lines as one write)', () => {
  it('holds lines for lingerMs and writes them as one write, in order, across turns', async () => {
    const r = recorder()
    const clock = new FakeClock(0)
    const b = new LineBatch(r.sink, 4096, clock, LINGER)
    for (let i = 0; i < 10; i++) b.write(`{"n":${i}}\n`)
    await new Promise((res) => setImmediate(res))
    for (let i = 10; i < 20; i++) b.write(`{"n":${i}}\n`)
    // A turn has passed, and 4 of the 5 ms: nothing is written before the linger ends.
    clock.advance(LINGER - 1)
    expect(r.writes).toEqual([])
    expect(clock.timers).toBe(1) // one timer for the batch, not one a line
    clock.advance(1)
    expect(r.writes).toHaveLength(1)
    expect(r.writes[0]!.split('\n').slice(0, -1)).toEqual(
      Array.from({ length: 20 }, (_, i) => `{"n":${i}}`)
    )
    // The timer is set again by the next line, and only by it.
    expect(clock.timers).toBe(0)
    clock.advance(LINGER * 10)
    expect(r.writes).toHaveLength(1)
    b.write('{"n":20}\n')
    expect(clock.timers).toBe(1)
    clock.advance(LINGER)
    expect(r.writes).toEqual([r.writes[0], '{"n":20}\n'])
  })

  it('writes at once when the next line would pass maxBytes, without waiting for the linger', () => {
    const r = recorder()
    const b = new LineBatch(r.sink, 30, new FakeClock(0), 60_000)
    b.write('{"a":"0123456789"}\n') // 19 bytes
    expect(r.writes).toEqual([])
    b.write('{"b":"0123456789"}\n')
    expect(r.writes).toEqual(['{"a":"0123456789"}\n'])
    b.flush()
    expect(r.writes).toEqual(['{"a":"0123456789"}\n', '{"b":"0123456789"}\n'])
  })

  it('never writes more than maxBytes at once, and never part of a line', async () => {
    const r = recorder()
    const clock = new FakeClock(0)
    const b = new LineBatch(r.sink, 100, clock, LINGER)
    const lines = Array.from(
      { length: 30 },
      (_, i) => `{"line":${i},"pad":"${'x'.repeat(i % 7)}"}\n`
    )
    for (const l of lines) b.write(l)
    clock.advance(LINGER)
    expect(r.writes.length).toBeGreaterThan(1)
    for (const w of r.writes) {
      expect(Buffer.byteLength(w)).toBeLessThanOrEqual(100)
      expect(w.endsWith('\n')).toBe(true)
    }
    expect(r.writes.join('')).toBe(lines.join(''))
  })

  it('measures bytes, not characters: lines of several-byte characters still fit a write', async () => {
    const r = recorder()
    const clock = new FakeClock(0)
    const b = new LineBatch(r.sink, 64, clock, LINGER)
    // 20 characters, 60 bytes each: two lines are 40 characters but 120 bytes.
    const line = '€'.repeat(19) + '\n'
    b.write('{}\n')
    b.write(line)
    b.write(line)
    b.write(line)
    clock.advance(LINGER)
    expect(r.writes).toEqual(['{}\n' + line, line, line])
  })

  it('flush() hands over what is held at once and flushes the sink', () => {
    const r = recorder()
    const b = new LineBatch(r.sink, 4096, new FakeClock(0))
    b.write('{"a":1}\n')
    b.write('{"a":2}\n')
    b.flush()
    expect(r.writes).toEqual(['{"a":1}\n{"a":2}\n'])
    expect(r.flushed()).toBe(1)
  })
})
