import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { calendarContract, charge, ledgerContract, storeContract } from './store-contract.js'

storeContract('MemoryStore', { make: async () => new MemoryStore() })
calendarContract('MemoryStore', { make: async () => new MemoryStore() })
ledgerContract('MemoryStore', { make: async () => new MemoryStore() })

describe('MemoryStore memory', () => {
  it('holds at most 51 buckets per key whatever the limit, and forgets idle keys', async () => {
    const store = new MemoryStore()
    const c = charge(1_000_000)
    const t0 = 1_700_000_000_000
    for (let i = 0; i < 5000; i++) await store.consume([c], t0 + i * 100)
    const entries = (store as unknown as { entries: Map<string, { buckets: Map<number, number> }> })
      .entries
    expect(entries.get(c.key)!.buckets.size).toBeLessThanOrEqual(51)
    // Idle past its window plus two buckets: the key is gone at the next sweep.
    await store.consume([charge(1)], t0 + 5000 * 100 + 60_000 + 2_400 + 1_000)
    expect(entries.has(c.key)).toBe(false)
  })
})

describe('the in-memory store under a flood of one-off keys (SPEC §4 store.memory_keys)', () => {
  it('keeps at most maxKeys windows, drops the idlest and counts it; a key in use stays', async () => {
    const { MemoryStore } = await import('../../src/limiter/memory-store.js')
    let told = 0
    const s = new MemoryStore({ maxKeys: 100, onDropped: () => told++ })
    const charge = (key: string) => ({
      kind: 'class' as const,
      key,
      limit: 10,
      windowMs: 60_000,
      cls: 'base' as const,
    })
    const t = Date.parse('2026-11-23T10:00:00Z')
    for (let i = 0; i < 1000; i++) {
      s.consumeSync([charge('steady')], t + i)
      s.consumeSync([charge(`one-off-${i}`)], t + i)
    }
    expect(s.size).toBe(100)
    expect(s.dropped).toBe(1000 + 1 - 100)
    expect(told).toBe(s.dropped)
    // The steady key, seen at every step (charged, then refused), was never the idlest: its window is whole.
    expect(s.consumeSync([charge('steady')], t + 1000).allowed).toBe(false)
  })
})
