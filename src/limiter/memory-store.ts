import {
  BUCKETS_PER_WINDOW,
  type Charge,
  type Decision,
  type GiveBack,
  type LimiterStore,
  type MonthlyCharge,
  type SlidingCharge,
  type RuleCharge,
} from '../types.js'
import { admitNothing, toWindowState } from './decision.js'

// The same bucketed sliding window as lua/check.lua, in this process only. The contract
// suite (test/limiter/store-contract.ts) holds both to one behaviour.

interface Entry {
  /** bucket index → calls; at most 51 live buckets per key. A calendar window uses bucket 0. */
  buckets: Map<number, number>
  expiresAtMs: number
}

interface Scan {
  used: number
  resetAtMs: number
  retryAtMs: number
  current: number
}

export class MemoryStore implements LimiterStore {
  private readonly entries = new Map<string, Entry>()
  private nextSweepMs = 0

  /** Every decision is local: always answered now. */
  consume(charges: readonly Charge[], nowMs: number): Decision {
    return this.consumeSync(charges, nowMs)
  }

  async peek(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    return this.consumeSync(charges, nowMs, { peek: true })
  }

  consumeSync(charges: readonly Charge[], nowMs: number, opts: { peek?: boolean } = {}): Decision {
    const peek = opts.peek === true
    const n = charges.length
    if (n === 0) return admitNothing(nowMs)
    this.sweep(nowMs)
    const scans: Scan[] = new Array(n)
    let allowed = true
    for (let i = 0; i < n; i++) {
      const c = charges[i]!
      scans[i] = c.kind === 'monthly' ? this.scanCalendar(c) : this.scan(c, nowMs)
      // SPEC §2: a dry-run rule is counted but never refuses.
      if (scans[i]!.retryAtMs !== 0 && !isShadow(c)) allowed = false
    }
    if (allowed && !peek) {
      for (let i = 0; i < n; i++) {
        const c = charges[i]!
        const s = scans[i]!
        // A dry-run rule that is over was never admitted by it: not charged.
        if (isShadow(c) && s.retryAtMs !== 0) continue
        if (c.kind === 'monthly') this.chargeCalendar(c)
        else this.chargeSliding(c, s, nowMs)
        s.used += 1
      }
    }
    const windows = new Array(n)
    for (let i = 0; i < n; i++) {
      const s = scans[i]!
      windows[i] = toWindowState(s.used, s.resetAtMs, s.retryAtMs, nowMs, charges[i]!.limit)
    }
    return { allowed, windows, nowMs }
  }

  private chargeSliding(c: SlidingCharge | RuleCharge, s: Scan, nowMs: number): void {
    const bucketMs = c.windowMs / BUCKETS_PER_WINDOW
    let e = this.entries.get(c.key)
    if (!e) {
      e = { buckets: new Map(), expiresAtMs: 0 }
      this.entries.set(c.key, e)
    }
    e.buckets.set(s.current, (e.buckets.get(s.current) ?? 0) + 1)
    e.expiresAtMs = nowMs + c.windowMs + 2 * bucketMs
    if (s.resetAtMs === 0) s.resetAtMs = (s.current + 1) * bucketMs + c.windowMs
  }

  private chargeCalendar(c: MonthlyCharge): void {
    let e = this.entries.get(c.key)
    if (!e) {
      e = { buckets: new Map(), expiresAtMs: c.endMs + 86_400_000 }
      this.entries.set(c.key, e)
    }
    e.buckets.set(0, (e.buckets.get(0) ?? 0) + 1)
  }

  /** A calendar window: one counter for the period, reset at its end (the key's name changes). */
  private scanCalendar(c: MonthlyCharge): Scan {
    const used = this.entries.get(c.key)?.buckets.get(0) ?? 0
    return { used, resetAtMs: c.endMs, retryAtMs: used + 1 > c.limit ? c.endMs : 0, current: 0 }
  }

  private scan(c: SlidingCharge | RuleCharge, nowMs: number): Scan {
    const bucketMs = c.windowMs / BUCKETS_PER_WINDOW
    const current = Math.floor(nowMs / bucketMs)
    const oldest = Math.floor((nowMs - c.windowMs) / bucketMs)
    const e = this.entries.get(c.key)
    let used = 0
    let first = Infinity
    if (e) {
      for (const [b, count] of e.buckets) {
        if (b < oldest) e.buckets.delete(b)
        else {
          used += count
          if (b < first) first = b
        }
      }
    }
    const resetAtMs = first === Infinity ? 0 : (first + 1) * bucketMs + c.windowMs
    let retryAtMs = 0
    if (used + 1 > c.limit && e) {
      retryAtMs = nowMs + c.windowMs
      const live = [...e.buckets].sort((a, b) => a[0] - b[0])
      let freed = 0
      for (const [b, count] of live) {
        freed += count
        if (used - freed + 1 <= c.limit) {
          retryAtMs = (b + 1) * bucketMs + c.windowMs
          break
        }
      }
    }
    return { used, resetAtMs, retryAtMs, current }
  }

  /**
   * As lua/give-back.lua: each use leaves the bucket it was charged in, only while that bucket
   * holds it (one that left the window took its calls with it), so no window goes below zero.
   */
  async giveBack(uses: readonly GiveBack[]): Promise<void> {
    for (const u of uses) {
      const e = this.entries.get(u.charge.key)
      if (e === undefined || u.units <= 0) continue
      const c = u.charge
      const bucket =
        c.kind === 'monthly' ? 0 : Math.floor(u.atMs / (c.windowMs / BUCKETS_PER_WINDOW))
      const held = e.buckets.get(bucket) ?? 0
      if (held < u.units) continue
      if (held === u.units) e.buckets.delete(bucket)
      else e.buckets.set(bucket, held - u.units)
    }
  }

  async credit(charge: MonthlyCharge, calls: number): Promise<{ before: number; after: number }> {
    const e = this.entries.get(charge.key)
    const before = e?.buckets.get(0) ?? 0
    const after = Math.max(0, before - calls)
    if (e !== undefined) e.buckets.set(0, after)
    return { before, after }
  }

  /** Idle keys expire, as Redis's PEXPIRE does; one pass at most every second. */
  private sweep(nowMs: number): void {
    if (nowMs < this.nextSweepMs) return
    this.nextSweepMs = nowMs + 1000
    for (const [key, e] of this.entries) if (e.expiresAtMs <= nowMs) this.entries.delete(key)
  }

  async ready(): Promise<boolean> {
    return true
  }

  async close(): Promise<void> {
    this.entries.clear()
  }
}

function isShadow(c: Charge): boolean {
  return c.kind === 'rule' && c.dryRun
}
