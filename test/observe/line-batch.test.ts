import { describe, expect, it } from 'vitest'
import { LineBatch } from '../../src/observe/line-batch.js'

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

const turn = () => new Promise((r) => setImmediate(r))

describe('LineBatch (issue #26: a turn’s first line at once, the rest as one write)', () => {
  it('writes a turn’s first line at once and the rest as one write at its end, in order', async () => {
    const r = recorder()
    const b = new LineBatch(r.sink, 4096)
    for (let i = 0; i < 20; i++) b.write(`{"n":${i}}\n`)
    expect(r.writes).toEqual(['{"n":0}\n'])
    await turn()
    expect(r.writes).toHaveLength(2)
    expect(r.writes.join('').split('\n').slice(0, -1)).toEqual(
      Array.from({ length: 20 }, (_, i) => `{"n":${i}}`)
    )
    // The next turn starts afresh: its first line goes at once again.
    b.write('{"n":20}\n')
    expect(r.writes).toHaveLength(3)
  })

  it('never writes more than maxBytes at once, and never part of a line', async () => {
    const r = recorder()
    const b = new LineBatch(r.sink, 100)
    const lines = Array.from(
      { length: 30 },
      (_, i) => `{"line":${i},"pad":"${'x'.repeat(i % 7)}"}\n`
    )
    for (const l of lines) b.write(l)
    await turn()
    expect(r.writes.length).toBeGreaterThan(1)
    for (const w of r.writes) {
      expect(Buffer.byteLength(w)).toBeLessThanOrEqual(100)
      expect(w.endsWith('\n')).toBe(true)
    }
    expect(r.writes.join('')).toBe(lines.join(''))
  })

  it('measures bytes, not characters: lines of several-byte characters still fit a write', async () => {
    const r = recorder()
    const b = new LineBatch(r.sink, 64)
    // 20 characters, 60 bytes each: two lines are 40 characters but 120 bytes.
    const line = '€'.repeat(19) + '\n'
    b.write('{}\n')
    b.write(line)
    b.write(line)
    b.write(line)
    await turn()
    expect(r.writes).toEqual(['{}\n', line, line, line])
  })

  it('flush() hands over what is held at once and flushes the sink', () => {
    const r = recorder()
    const b = new LineBatch(r.sink, 4096)
    b.write('{"a":1}\n')
    b.write('{"a":2}\n')
    b.flush()
    expect(r.writes).toEqual(['{"a":1}\n', '{"a":2}\n'])
    expect(r.flushed()).toBe(1)
  })
})
