import {
  BUCKETS_PER_WINDOW,
  type BatchId,
  type Charge,
  type CreditEntry,
  type Decision,
  type GiveBack,
  type LedgerBatch,
  type LedgerMonth,
  type LedgerRef,
  type LimiterStore,
  type MonthlyCharge,
  type SlidingCharge,
  type RuleCharge,
} from '../types.js'
import { admitNothing, toWindowState } from './decision.js'
import { keys } from './keys.js'
import { firstTime } from './once.js'

/** SPEC §5 "One ledger", in this process: a team's month and its days, changed together. */
interface Ledger extends LedgerMonth {
  /** The last batch of late calls each process wrote here (batch/recorder.ts). */
  seen: Map<string, number>
  expiresAtMs: number
}

/** lua/ledger.lua's addToMonth: the month and its day together (used = Σ days − Σ credits). */
function addToMonth(l: Ledger, day: string, n: number): void {
  l.used += n
  l.days.set(day, (l.days.get(day) ?? 0) + n)
}

/** lua/ledger.lua's creditMonth: the month lowered, its day's credits raised by as much. */
function creditMonth(l: Ledger, day: string, n: number): void {
  l.used -= n
  l.credited.set(day, (l.credited.get(day) ?? 0) + n)
}

/** Kept as long as Redis keeps them: 400 days past the month's end. */
const LEDGER_KEEP_MS = 400 * 86_400_000

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

/** SPEC §4: the windows kept by default (store.memory_keys). */
export const MEMORY_KEYS = 200_000

export interface MemoryStoreOptions {
  /** Windows kept at most; past it the one idle longest is dropped (store.memory_keys). */
  maxKeys?: number
  /** A window was dropped to stay within maxKeys (basegate_store_memory_dropped_total). */
  onDropped?: () => void
}

export class MemoryStore implements LimiterStore {
  /** Window key → its buckets, in order of last charge: the first is the idlest. */
  private readonly entries = new Map<string, Entry>()
  private readonly maxKeys: number
  /** Windows dropped to stay within maxKeys. */
  dropped = 0
  private readonly ledgers = new Map<string, Ledger>()
  /** Notice claims: `key` → the claimant's token. */
  private readonly notices = new Map<string, string>()
  private nextSweepMs = 0

  constructor(private readonly opts: MemoryStoreOptions = {}) {
    this.maxKeys = opts.maxKeys ?? MEMORY_KEYS
  }

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
      // SPEC §4: a flood of one-off keys holds at most maxKeys windows; the idlest goes.
      if (this.entries.size >= this.maxKeys) this.dropIdlest()
      this.entries.set(c.key, e)
    }
    e.buckets.set(s.current, (e.buckets.get(s.current) ?? 0) + 1)
    e.expiresAtMs = nowMs + c.windowMs + 2 * bucketMs
    if (s.resetAtMs === 0) s.resetAtMs = (s.current + 1) * bucketMs + c.windowMs
  }

  private ledger(key: string, endMs: number): Ledger {
    let l = this.ledgers.get(key)
    if (l === undefined) {
      l = {
        used: 0,
        days: new Map(),
        credited: new Map(),
        quota: null,
        credits: [],
        seen: new Map(),
        expiresAtMs: endMs + LEDGER_KEEP_MS,
      }
      this.ledgers.set(key, l)
    }
    return l
  }

  /** SPEC §5: the month and its day in one write, with the quota in force. */
  private chargeCalendar(c: MonthlyCharge): void {
    const l = this.ledger(c.key, c.endMs)
    addToMonth(l, c.day, 1)
    l.quota = c.limit
  }

  /** A calendar window: the ledger's count for the period (the key's name changes with it). */
  private scanCalendar(c: MonthlyCharge): Scan {
    const used = this.ledgers.get(c.key)?.used ?? 0
    return { used, resetAtMs: c.endMs, retryAtMs: used + 1 > c.limit ? c.endMs : 0, current: 0 }
  }

  /**
   * SPEC §5 on_error open: the fallback starts a month from the last count the shared store
   * showed this process, so a team known to be used up stays refused (never counts down).
   */
  seedMonth(c: MonthlyCharge, used: number): void {
    const l = this.ledger(c.key, c.endMs)
    if (used > l.used) l.used = used
  }

  async credit(
    ref: LedgerRef,
    c: { calls: number; note: string | null; atMs: number; day: string; quota: number }
  ): Promise<CreditEntry> {
    const l = this.ledger(keys.ledger(ref.team, ref.month), ref.endMs)
    const before = l.used
    const calls = Math.min(before, c.calls)
    if (calls > 0) creditMonth(l, c.day, calls)
    const entry: CreditEntry = {
      atMs: c.atMs,
      calls,
      asked: c.calls,
      note: c.note,
      before,
      after: l.used,
    }
    l.credits.push(entry)
    if (l.used * 5 < c.quota * 4) this.notices.delete(keys.notice(ref.team, ref.month, 80))
    if (l.used < c.quota) this.notices.delete(keys.notice(ref.team, ref.month, 100))
    return entry
  }

  async readLedger(ref: LedgerRef): Promise<LedgerMonth> {
    const l = this.ledgers.get(keys.ledger(ref.team, ref.month))
    if (l === undefined)
      return { used: 0, days: new Map(), credited: new Map(), quota: null, credits: [] }
    const { used, quota } = l
    return {
      used,
      quota,
      days: new Map(l.days),
      credited: new Map(l.credited),
      credits: [...l.credits],
    }
  }

  async addToLedger(batch: LedgerBatch, id: BatchId): Promise<void> {
    for (const [key, { ref, days, doubts }] of batch) {
      const l = this.ledger(key, ref.endMs)
      if (!firstTime(l.seen, id)) continue
      // In process nothing is in doubt: no check of this store went unanswered.
      const all = [...days, ...[...(doubts ?? [])].map(([d, tags]) => [d, tags.length] as const)]
      for (const [day, n] of all) addToMonth(l, day, n)
    }
  }

  async claimNotice(ref: LedgerRef, threshold: 80 | 100, token: string): Promise<boolean> {
    const k = keys.notice(ref.team, ref.month, threshold)
    const had = this.notices.get(k)
    if (had === undefined) this.notices.set(k, token)
    return had === undefined || had === token
  }

  private scan(c: SlidingCharge | RuleCharge, nowMs: number): Scan {
    const bucketMs = c.windowMs / BUCKETS_PER_WINDOW
    const current = Math.floor(nowMs / bucketMs)
    const oldest = Math.floor((nowMs - c.windowMs) / bucketMs)
    const e = this.entries.get(c.key)
    let used = 0
    let first = Infinity
    if (e) {
      // Seen last goes last (a refused call is seen too): the map's order is idleness, so a
      // full window a flood keeps knocking on is never the one dropped.
      this.entries.delete(c.key)
      this.entries.set(c.key, e)
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
      const c = u.charge
      if (c.kind === 'monthly') {
        const l = this.ledgers.get(c.key)
        const onDay = l?.days.get(c.day) ?? 0
        if (l === undefined || u.units <= 0 || onDay < u.units || l.used < u.units) continue
        addToMonth(l, c.day, -u.units)
        continue
      }
      const e = this.entries.get(c.key)
      if (e === undefined || u.units <= 0) continue
      const bucket = Math.floor(u.atMs / (c.windowMs / BUCKETS_PER_WINDOW))
      const held = e.buckets.get(bucket) ?? 0
      if (held < u.units) continue
      if (held === u.units) e.buckets.delete(bucket)
      else e.buckets.set(bucket, held - u.units)
    }
  }

  private dropIdlest(): void {
    const idlest = this.entries.keys().next().value
    if (idlest === undefined) return
    this.entries.delete(idlest)
    this.dropped++
    this.opts.onDropped?.()
  }

  /** Windows held now. */
  get size(): number {
    return this.entries.size
  }

  /** Idle keys expire, as Redis's PEXPIRE does; one pass at most every second. */
  private sweep(nowMs: number): void {
    if (nowMs < this.nextSweepMs) return
    this.nextSweepMs = nowMs + 1000
    for (const [key, e] of this.entries) if (e.expiresAtMs <= nowMs) this.entries.delete(key)
    for (const [key, l] of this.ledgers) if (l.expiresAtMs <= nowMs) this.ledgers.delete(key)
  }

  async ready(): Promise<boolean> {
    return true
  }

  async close(): Promise<void> {
    this.entries.clear()
    this.ledgers.clear()
  }
}

function isShadow(c: Charge): boolean {
  return c.kind === 'rule' && c.dryRun
}
