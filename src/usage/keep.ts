import { fnv1a } from '../hash.js'
import { zonedDayClock, type DayBounds } from '../quota/month.js'

// SPEC §4 "Nothing a stranger sends outlives its window". What basegate keeps beyond a rate
// window (day counts §5, the upgrade report §8, tuning evidence §11) is kept per key only for
// keys worth keeping:
// - bases of a team, bases named in the file or an override, clients an override lists (known);
// - any other key once it has made `usage.keep_after` calls in a day in this process, or came
//   within a tenth of a limit (a window's count at 90 % of it or more: shared by every instance);
// the rest go to one `others` count per class and day, so a flood of one-off keys writes a
// constant number of long-lived store keys. A key's own counts start with the call that makes
// it worth keeping (its calls before that, that day, stay in `others`: the counts add up, each
// call once), and a key kept one day is kept the next from its first call, so a key that calls
// every day has whole days. Memory is bounded: at most MAX_TRACKED keys counted (two
// generations: the older is dropped when the newer fills) and MAX_KEPT keys kept a day; past
// that a key stays in `others`. A key is counted under its 32-bit hash, not its text: a
// stranger's key is held no longer than its window here either, and a count costs a number
// (100,000 one-off keys retain 3.5 MB; with their text, 11.9: test/usage/keep.test.ts). Two
// keys that share a hash share a count, so a key may be kept a little early: rare (a few
// pairs in 200,000 keys) and harmless (it is only counted by name).

/** Keys whose calls a day are counted (towards keep_after) at once, per generation. */
export const MAX_TRACKED = 100_000
/** Keys kept a day, besides the known ones. */
export const MAX_KEPT = 100_000

export interface KeepRules {
  /** Calls a day after which a key is kept (usage.keep_after; 0: every key). */
  keepAfter: number
  /** A key that is kept whatever its calls (a team's base, a base or client an override names). */
  known: (key: string) => boolean
}

export class Keeper {
  private readonly dayOf = zonedDayClock(() => this.timezone())
  private day: DayBounds | null = null
  /** Calls of today counted per key's hash (two generations). */
  private counts = new Map<number, number>()
  private older = new Map<number, number>()
  /** Kept today, and yesterday (kept today from their first call). */
  private kept = new Set<string>()
  private keptBefore = new Set<string>()
  /** Keys that could not be kept today (MAX_KEPT reached). */
  full = 0

  constructor(
    private readonly rules: () => KeepRules,
    private readonly timezone: () => string
  ) {}

  /**
   * A call of `key` (its day: `nowMs`); `near`: one of its windows was at 90 % of its limit or
   * over. True when the call counts under its own key; false: under its class's `others`.
   */
  see(key: string, nowMs: number, near: boolean): boolean {
    this.rollDay(nowMs)
    if (this.kept.has(key)) return true
    const rules = this.rules()
    if (rules.keepAfter === 0 || rules.known(key)) return true
    // Kept yesterday: kept from its first call today, so it has no count to drop.
    if (this.keptBefore.has(key)) return this.keep(key, null)
    const h = fnv1a(key)
    const n = (this.counts.get(h) ?? this.older.get(h) ?? 0) + 1
    if (near || n >= rules.keepAfter) return this.keep(key, h)
    if (this.counts.size >= MAX_TRACKED) {
      this.older = this.counts
      this.counts = new Map()
    }
    this.counts.set(h, n)
    return false
  }

  /** Whether `key` is kept now (no call counted: the upgrade report asks before the call ends). */
  keeps(key: string, nowMs: number): boolean {
    this.rollDay(nowMs)
    if (this.kept.has(key) || this.keptBefore.has(key)) return true
    const rules = this.rules()
    return rules.keepAfter === 0 || rules.known(key)
  }

  /** Keeps `key` from now; `h`: its hash, when it was counted towards keep_after today. */
  private keep(key: string, h: number | null): boolean {
    if (this.kept.size >= MAX_KEPT) {
      this.full++
      return false
    }
    this.kept.add(key)
    if (h !== null) {
      this.counts.delete(h)
      this.older.delete(h)
    }
    return true
  }

  private rollDay(nowMs: number): void {
    const d = this.day
    if (d !== null && nowMs >= d.startMs && nowMs < d.endMs) return
    const next = this.dayOf(nowMs)
    if (d !== null && next.id !== d.id) {
      this.keptBefore = this.kept
      this.kept = new Set()
      this.counts = new Map()
      this.older = new Map()
    }
    this.day = next
  }

  /** Keys kept today (metrics, tests). */
  get keptToday(): number {
    return this.kept.size
  }
}

/** The `others` subject of a class (its calls of keys not kept, per day). */
export const othersOf = (cls: string): string => `others:${cls}`

export const isOthers = (subject: string): boolean => subject.startsWith('others:')
