import { addDays, daysBetween, startOfLocalMonth, dayBounds } from '../quota/month.js'
import type { LedgerMonth, LedgerRef, Ledger } from '../types.js'
import { monthsOf } from './store.js'

// SPEC §5 "History and export": a team's days and months as its ledgers have them, and the
// pace of the last 7 full days. Pure but for the reads.

export interface DayCalls {
  calls: number
  credited: number
}

/** One month of a range: its own figures (never this month's beside a past one). */
export interface MonthRow {
  month: string
  /** The quota in force (this month: now; a past one: at its last charged call); null: none. */
  quota: number | null
  used: number
  credited: number
  remaining: number | null
}

export interface Pace {
  /** Calls per day over the last 7 full days and today's part (issue #49: today counts). */
  per_day: number
  /** This month's total if that pace holds to its end. */
  projected: number
  /** The day the quota runs out at that pace, when that is before the month ends; else null. */
  runs_out: string | null
  /** The day this month's calls reached the quota, when they have (its calls get 429). */
  used_up_on: string | null
}

/** A month ("2026-11") of the zone as a ledger reference. */
export function ledgerRef(team: string, month: string, timeZone: string): LedgerRef {
  const [y, m] = month.split('-').map(Number) as [number, number]
  const endMs = startOfLocalMonth(m === 12 ? y + 1 : y, m === 12 ? 0 : m, timeZone)
  return { team, month, endMs }
}

/**
 * A team's ledgers over [from, to] (YYYY-MM-DD): its calls and credits per day, and each month's
 * figures. `current` is this month's quota as it stands now (the live one, not the ledger's).
 */
export async function readTeamRange(
  store: Pick<Ledger, 'readLedger'>,
  team: string,
  range: { from: string; to: string; timeZone: string },
  current: { month: string; quota: number } | null
): Promise<{ days: Map<string, DayCalls>; months: MonthRow[]; ledgers: Map<string, LedgerMonth> }> {
  const months = monthsOf(range.from, range.to)
  const ledgers = await Promise.all(
    months.map((m) => store.readLedger(ledgerRef(team, m, range.timeZone)))
  )
  const days = new Map<string, DayCalls>()
  const rows: MonthRow[] = []
  const byMonth = new Map<string, LedgerMonth>()
  months.forEach((month, i) => {
    const l = ledgers[i]!
    byMonth.set(month, l)
    for (const [dd, n] of l.days) put(days, `${month}-${dd}`, n, 0)
    for (const [dd, n] of l.credited) put(days, `${month}-${dd}`, 0, n)
    let credited = 0
    for (const n of l.credited.values()) credited += n
    const quota = current !== null && current.month === month ? current.quota : l.quota
    const remaining = quota === null ? null : Math.max(0, quota - l.used)
    rows.push({ month, quota, used: l.used, credited, remaining })
  })
  for (const d of [...days.keys()]) if (d < range.from || d > range.to) days.delete(d)
  return { days, months: rows, ledgers: byMonth }
}

function put(days: Map<string, DayCalls>, date: string, calls: number, credited: number): void {
  const d = days.get(date)
  if (d === undefined) days.set(date, { calls, credited })
  else {
    d.calls += calls
    d.credited += credited
  }
}

/** The 7 full days before `today` (YYYY-MM-DD), oldest first. */
export function lastFullWeek(today: string): { from: string; to: string } {
  return { from: addDays(today, -7), to: addDays(today, -1) }
}

/**
 * SPEC §5 pace: the last 7 full days' calls per day with today's part (a team that used its
 * month today has a pace), this month's total if it holds, the day the quota runs out at it (a
 * team ramping up is seen at its new pace, not its month's average), and the day it was used up.
 * `days`: this month's calls and credits by date, today's included, when the caller has them.
 */
export function paceOf(
  week: readonly number[],
  month: { used: number; quota: number | null; endMs: number },
  nowMs: number,
  timeZone: string,
  days: ReadonlyMap<string, DayCalls> = new Map()
): Pace {
  const today = dayBounds(nowMs, timeZone)
  const todayCalls = days.get(today.id)?.calls ?? 0
  const elapsed = Math.min(1, Math.max(0, (nowMs - today.startMs) / 86_400_000))
  const perDay = (week.reduce((a, b) => a + b, 0) + todayCalls) / (7 + elapsed)
  const daysLeft = Math.max(0, (month.endMs - nowMs) / 86_400_000)
  const projected = Math.round(month.used + perDay * daysLeft)
  let runsOut: string | null = null
  let usedUpOn: string | null = null
  const q = month.quota
  if (q !== null && q > 0 && month.used >= q) {
    runsOut = today.id
    usedUpOn = usedUpDay(days, today.id, q) ?? today.id
  } else if (q !== null && q > 0 && perDay > 0 && projected >= q) {
    const at = nowMs + ((q - month.used) / perDay) * 86_400_000
    if (at < month.endMs) runsOut = dayBounds(at, timeZone).id
  }
  return {
    per_day: Math.round(perDay * 10) / 10,
    projected,
    runs_out: runsOut,
    used_up_on: usedUpOn,
  }
}

/** The first day of today's month whose running total (calls less credits) reached `quota`. */
function usedUpDay(days: ReadonlyMap<string, DayCalls>, todayId: string, quota: number) {
  let sum = 0
  for (let d = `${todayId.slice(0, 7)}-01`; d <= todayId; d = addDays(d, 1)) {
    const v = days.get(d)
    if (v !== undefined) sum += v.calls - v.credited
    if (sum >= quota) return d
  }
  return null
}

/** The calls of each day of [from, to] (0 where none), oldest first. */
export function callsOn(
  counts: Map<string, number> | Map<string, DayCalls>,
  from: string,
  to: string
): number[] {
  const out: number[] = []
  for (let i = 0; i <= daysBetween(from, to); i++) {
    const v = counts.get(addDays(from, i))
    out.push(v === undefined ? 0 : typeof v === 'number' ? v : v.calls)
  }
  return out
}
