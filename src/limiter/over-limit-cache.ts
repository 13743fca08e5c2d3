import type { Charge, Decision, WindowState } from '../types.js'

interface Entry {
  limit: number
  retryAtMs: number
}

/**
 * Envoy's local over-limit cache: a window the store found full stays full until its
 * retryAt (counts in the store only grow before then: other instances add calls, refused
 * calls add none, and no bucket leaves earlier). Until then a request charging that window
 * is refused from memory, without a store round trip, so a flood costs the store nothing.
 * It only ever refuses what the store would refuse (SPEC §3 holds across instances).
 */
export class OverLimitCache {
  private readonly entries = new Map<string, Entry>()

  constructor(private readonly maxEntries = 100_000) {}

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
      return e === undefined
        ? // Not known to be full: its true count is unknown here, so claim no use of it.
          {
            limit: c.limit,
            windowMs: c.windowMs,
            used: 0,
            remaining: c.limit,
            resetAtMs: nowMs,
            retryAtMs: 0,
          }
        : {
            limit: c.limit,
            windowMs: c.windowMs,
            used: c.limit,
            remaining: 0,
            resetAtMs: e.retryAtMs,
            retryAtMs: e.retryAtMs,
          }
    })
    return { allowed: false, windows }
  }

  /** Remembers the windows a store decision found full. */
  learn(charges: readonly Charge[], decision: Decision, nowMs: number): void {
    if (decision.allowed) return
    for (let i = 0; i < charges.length; i++) {
      const w = decision.windows[i]!
      // A monthly quota can be raised at any moment through the admin API of any instance;
      // only the store knows, so a full quota is never answered from memory.
      if (w.retryAtMs <= nowMs || charges[i]!.kind === 'monthly') continue
      if (this.entries.size >= this.maxEntries) this.evictExpired(nowMs)
      if (this.entries.size >= this.maxEntries) return
      this.entries.set(charges[i]!.key, { limit: w.limit, retryAtMs: w.retryAtMs })
    }
  }

  private evictExpired(nowMs: number): void {
    for (const [k, e] of this.entries) if (e.retryAtMs <= nowMs) this.entries.delete(k)
  }
}
