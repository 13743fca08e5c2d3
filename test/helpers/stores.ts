import { MemoryStore } from '../../src/limiter/memory-store.js'
import type { LimiterStore } from '../../src/types.js'

/**
 * A LimiterStore of the parts a test gives (a store that fails, that counts its calls), every
 * other part a real MemoryStore's: no method of the seam is a stub that answers nothing.
 */
export function storeOf(parts: Partial<LimiterStore>, mem = new MemoryStore()): LimiterStore {
  return {
    consume: mem.consume.bind(mem),
    peek: mem.peek.bind(mem),
    giveBack: mem.giveBack.bind(mem),
    credit: mem.credit.bind(mem),
    readLedger: mem.readLedger.bind(mem),
    addToLedger: mem.addToLedger.bind(mem),
    claimNotice: mem.claimNotice.bind(mem),
    ready: mem.ready.bind(mem),
    close: mem.close.bind(mem),
    ...parts,
  }
}

/** Every base a usage store lists for a month (its pages, in one list). */
export async function allBases(
  store: { bases(month: string): AsyncIterable<string[]> },
  month: string
): Promise<string[]> {
  const out: string[] = []
  for await (const page of store.bases(month)) out.push(...page)
  return out
}
