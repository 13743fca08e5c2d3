import v8 from 'node:v8'
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { Keeper, MAX_KEPT, type KeepRules } from '../../src/usage/keep.js'

// SPEC §4 "Nothing a stranger sends outlives its window": which keys are kept by name.

const DAY = Date.parse('2026-11-23T10:00:00Z')
v8.setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void
/** The heap that survives a full collection (what is held, not garbage). */
const retainedMb = () => {
  gc()
  return process.memoryUsage().heapUsed / 2 ** 20
}
const NEXT_DAY = Date.parse('2026-11-24T10:00:00Z')

function keeper(rules: Partial<KeepRules> = {}) {
  const r: KeepRules = { keepAfter: 3, known: () => false, ...rules }
  return new Keeper(
    () => r,
    () => 'UTC'
  )
}

describe('Keeper', () => {
  it('a key is kept from the call that makes keep_after calls in a day; before it, others', () => {
    const k = keeper()
    expect([k.see('base:a', DAY, false), k.see('base:a', DAY, false)]).toEqual([false, false])
    expect(k.see('base:a', DAY, false)).toBe(true)
    expect(k.see('base:a', DAY, false)).toBe(true)
    expect(k.keeps('base:a', DAY)).toBe(true)
    expect(k.keeps('base:b', DAY)).toBe(false)
  })

  it('near a limit (a window at 90 %), a key is kept at once; a known key always; keep_after 0 keeps every key', () => {
    expect(keeper().see('base:n', DAY, true)).toBe(true)
    expect(keeper({ known: (key) => key === 'base:team' }).see('base:team', DAY, false)).toBe(true)
    expect(keeper({ keepAfter: 0 }).see('ip:1.2.3.4', DAY, false)).toBe(true)
  })

  it('a key kept one day is kept the next from its first call; a key seen once a day never is', () => {
    const k = keeper()
    for (let i = 0; i < 3; i++) k.see('base:daily', DAY, false)
    k.see('base:once', DAY, false)
    expect(k.see('base:daily', NEXT_DAY, false)).toBe(true)
    expect(k.see('base:once', NEXT_DAY, false)).toBe(false)
    // The day's counts start again: once more, and it is still under keep_after.
    expect(k.see('base:once', NEXT_DAY, false)).toBe(false)
  })

  it('a flood of one-off keys keeps none and holds a bounded memory; past MAX_KEPT a key stays in others', () => {
    const k = keeper({ keepAfter: 1_000_000 })
    for (let i = 0; i < 250_000; i++) expect(k.see(`base:${i}`, DAY, false)).toBe(false)
    expect(k.keptToday).toBe(0)
    const near = keeper()
    for (let i = 0; i < MAX_KEPT; i++) near.see(`base:${i}`, DAY, true)
    expect(near.see('base:one-more', DAY, true)).toBe(false)
    expect(near.full).toBe(1)
  })

  it("counts a one-off key without holding its text (SPEC §4: a stranger's key outlives no window)", () => {
    const k = keeper({ keepAfter: 1_000_000 })
    // Keys as long as a base's (`base:` and a UUID): their text would be ~100 bytes a count.
    const key = (i: number) => `base:${i.toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
    const before = retainedMb()
    for (let i = 0; i < 100_000; i++) k.see(key(i), DAY, false)
    const held = retainedMb() - before
    console.log(`keep_after counts of 100,000 one-off keys: ${held.toFixed(1)} MB retained`)
    expect(k.keptToday).toBe(0)
    expect(held).toBeLessThan(6)
  })
})
