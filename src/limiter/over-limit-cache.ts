import type { Charge, Decision, WindowState } from '../types.js'

interface Entry {
  limit: number
  /** On this process's clock. */
  retryAtMs: number
}

/**
 * Envoy's local over-limit cache: a window the store found full stays full until its
 * retryAt (counts in the store only grow before then: other instances add calls, refused
 * calls add none, and no bucket leaves earlier). Until then a request charging that window
 * is refused from memory, without a store round trip, so a flood costs the store nothing.
 * It only ever refuses what the store would refuse (SPEC §3 holds across instances).
 *
 * Bounded: the Map keeps insertion order, so when it is full the oldest entry goes in O(1).
 */
export class OverLimitCache {
  private readonly entries = new Map<string, Entry>()

  constructor(private readonly maxEntries = 100_000) {}

  get size(): number {
    return this.entries.size
  }

  /** A refusal built from memory, or null when the store must be asked. */
  check(charges: readonly Charge[], nowMs: number): Decision | null {
    if (this.entries.size === 0) return null
    let hit = false
    for (const c of charges) {
      const e = this.entries.get(c.key)
      if (e === undefined) continue
      // A reload that changed the limit makes the entry meaningless.
      if (e.retryAtMs <= nowMs || e.limit !== c.limit) this.entries.delete(c.key)
      else hit = true
    }
    if (!hit) return null
    const windows: WindowState[] = charges.map((c) => {
      const e = this.entries.get(c.key)
      // Not known to be full: its true count is unknown here; it never shows as a state.
      if (e === undefined) {
        return {
          limit: c.limit,
          used: 0,
          remaining: c.limit,
          resetAtMs: nowMs,
          retryAtMs: 0,
          unknown: true,
        }
      }
      return {
        limit: c.limit,
        used: c.limit,
        remaining: 0,
        resetAtMs: e.retryAtMs,
        retryAtMs: e.retryAtMs,
      }
    })
    return { allowed: false, windows, nowMs }
  }

  /** Remembers the windows a store decision found full (its times moved to this clock). */
  learn(charges: readonly Charge[], decision: Decision, nowMs: number): void {
    if (decision.allowed) return
    const skew = nowMs - decision.nowMs
    for (let i = 0; i < charges.length; i++) {
      const w = decision.windows[i]!
      const c = charges[i]!
      // A monthly quota can be raised at any moment through the admin API of any instance;
      // only the store knows, so a full quota is never answered from memory. A dry-run rule
      // never refuses.
      if (w.retryAtMs <= decision.nowMs || c.kind === 'monthly') continue
      if (c.kind === 'rule' && c.dryRun) continue
      if (this.entries.size >= this.maxEntries) {
        const oldest = this.entries.keys().next().value
        if (oldest !== undefined) this.entries.delete(oldest)
      }
      this.entries.delete(c.key)
      this.entries.set(c.key, { limit: w.limit, retryAtMs: w.retryAtMs + skew })
    }
  }
}
