import { describe, expect, it } from 'vitest'
import { MEMO_KEY_MAX, memo1, memo2 } from '../../src/request/memo.js'

// SPEC §12: what depends only on the method and path is worked out once; SPEC §4: a stranger's
// long made-up paths are not kept for it.

describe('memo1 and memo2', () => {
  it('keep a short key: worked out once', () => {
    let runs = 0
    const f = memo1(10, (a) => (runs++, a.length))
    const g = memo2(10, (a, b) => (runs++, a.length + b.length))
    for (let i = 0; i < 3; i++) {
      expect(f('/api2/ping/')).toBe(11)
      expect(g('GET', '/api2/ping/')).toBe(14)
    }
    expect(runs).toBe(2)
  })

  it('keep no key longer than MEMO_KEY_MAX: worked out every time, and the answer the same', () => {
    let runs = 0
    const f = memo1(10, (a) => (runs++, a.length))
    const g = memo2(10, (a, b) => (runs++, a.length + b.length))
    const long = '/' + 'x'.repeat(MEMO_KEY_MAX)
    for (let i = 0; i < 3; i++) {
      expect(f(long)).toBe(MEMO_KEY_MAX + 1)
      expect(g('GET', long.slice(3))).toBe(MEMO_KEY_MAX + 1)
    }
    expect(runs).toBe(6)
    // At the bound itself, kept.
    const atMax = 'y'.repeat(MEMO_KEY_MAX)
    f(atMax)
    f(atMax)
    expect(runs).toBe(7)
  })

  it('hold at most `max` keys (then start again)', () => {
    let runs = 0
    const f = memo1(4, (a) => (runs++, a))
    for (const k of ['a', 'b', 'c', 'd', 'e', 'a']) f(k)
    expect(runs).toBe(6)
  })
})
