// Calendar months in an IANA time zone (SPEC §5: quotas reset when the month ends in
// `monthly.timezone`). Pure; the boundaries are cached, so the per-request cost is a compare.

export interface MonthBounds {
  /** "2026-11": the month's name in the time zone (part of the counter's key). */
  id: string
  startMs: number
  /** The first instant of the next month in the time zone. */
  endMs: number
}

const formatters = new Map<string, Intl.DateTimeFormat>()

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone)
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    formatters.set(timeZone, f)
  }
  return f
}

/** The wall-clock fields of an instant in a time zone. */
function wallClock(
  ms: number,
  timeZone: string
): { y: number; mo: number; d: number; h: number; mi: number; s: number } {
  const parts: Record<string, number> = {}
  for (const p of formatter(timeZone).formatToParts(ms))
    if (p.type !== 'literal') parts[p.type] = Number(p.value)
  return {
    y: parts.year!,
    mo: parts.month!,
    d: parts.day!,
    h: parts.hour! % 24,
    mi: parts.minute!,
    s: parts.second!,
  }
}

/** The zone's offset from UTC at an instant, in ms (local = UTC + offset). */
function offsetAt(ms: number, timeZone: string): number {
  const w = wallClock(ms, timeZone)
  const asUtc = Date.UTC(w.y, w.mo - 1, w.d, w.h, w.mi, w.s)
  return asUtc - Math.floor(ms / 1000) * 1000
}

/** The instant at which local midnight starts day 1 of (year, month0) in the zone. */
export function startOfLocalMonth(year: number, month0: number, timeZone: string): number {
  const local = Date.UTC(year, month0, 1, 0, 0, 0)
  // Two passes: the offset at the guess may differ from the offset at the answer (DST).
  let instant = local - offsetAt(local, timeZone)
  instant = local - offsetAt(instant, timeZone)
  return instant
}

export function monthBounds(nowMs: number, timeZone: string): MonthBounds {
  const w = wallClock(nowMs, timeZone)
  const startMs = startOfLocalMonth(w.y, w.mo - 1, timeZone)
  const endMs = startOfLocalMonth(w.mo === 12 ? w.y + 1 : w.y, w.mo === 12 ? 0 : w.mo, timeZone)
  return { id: `${w.y}-${String(w.mo).padStart(2, '0')}`, startMs, endMs }
}

/** monthBounds with the answer kept until the month ends. */
export function createMonthClock(timeZone: string): (nowMs: number) => MonthBounds {
  let cached: MonthBounds | null = null
  return (nowMs) => {
    if (cached === null || nowMs >= cached.endMs || nowMs < cached.startMs)
      cached = monthBounds(nowMs, timeZone)
    return cached
  }
}

// Days in the same zone (SPEC §5 "usage over time": calls per day, days in monthly.timezone).

/** One calendar day in the zone. */
export interface DayBounds {
  /** "2026-11-25". */
  id: string
  /** "2026-11": the month it belongs to. */
  month: string
  startMs: number
  /** The first instant of the next day in the zone. */
  endMs: number
}

const pad2 = (n: number) => String(n).padStart(2, '0')

/** The instant at which local midnight starts (year, month0, day) in the zone. */
function startOfLocalDay(year: number, month0: number, day: number, timeZone: string): number {
  const local = Date.UTC(year, month0, day, 0, 0, 0)
  let instant = local - offsetAt(local, timeZone)
  instant = local - offsetAt(instant, timeZone)
  return instant
}

export function dayBounds(nowMs: number, timeZone: string): DayBounds {
  const w = wallClock(nowMs, timeZone)
  const startMs = startOfLocalDay(w.y, w.mo - 1, w.d, timeZone)
  const next = new Date(Date.UTC(w.y, w.mo - 1, w.d + 1))
  const endMs = startOfLocalDay(
    next.getUTCFullYear(),
    next.getUTCMonth(),
    next.getUTCDate(),
    timeZone
  )
  const month = `${w.y}-${pad2(w.mo)}`
  return { id: `${month}-${pad2(w.d)}`, month, startMs, endMs }
}

/** dayBounds with the answer kept until the day ends: the per-request cost is a compare. */
export function createDayClock(timeZone: string): (nowMs: number) => DayBounds {
  let cached: DayBounds | null = null
  return (nowMs) => {
    if (cached === null || nowMs >= cached.endMs || nowMs < cached.startMs)
      cached = dayBounds(nowMs, timeZone)
    return cached
  }
}

/**
 * createDayClock for the zone in force (`zone()`: monthly.timezone, which a reload may change):
 * the one cache of days for every per-call counter (usage days, the keeper, tuning evidence).
 */
export function zonedDayClock(zone: () => string): (nowMs: number) => DayBounds {
  let current: string | null = null
  let clock: (nowMs: number) => DayBounds = () => {
    throw new Error('no zone')
  }
  return (nowMs) => {
    const z = zone()
    if (z !== current) {
      current = z
      clock = createDayClock(z)
    }
    return clock(nowMs)
  }
}

/** A calendar date written YYYY-MM-DD that exists (2026-02-30 does not); null otherwise. */
export function parseIsoDate(text: string): { y: number; m: number; d: number } | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text)
  if (m === null) return null
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])]
  const t = new Date(Date.UTC(y, mo - 1, d))
  if (t.getUTCFullYear() !== y || t.getUTCMonth() !== mo - 1 || t.getUTCDate() !== d) return null
  return { y, m: mo, d }
}

/** Whole days from date `a` to date `b` (both YYYY-MM-DD; negative when b is earlier). */
export function daysBetween(a: string, b: string): number {
  const at = (s: string) => {
    const p = parseIsoDate(s)!
    return Date.UTC(p.y, p.m - 1, p.d)
  }
  return Math.round((at(b) - at(a)) / 86_400_000)
}

/** The date `n` days after `date` (YYYY-MM-DD). */
export function addDays(date: string, n: number): string {
  const p = parseIsoDate(date)!
  const t = new Date(Date.UTC(p.y, p.m - 1, p.d + n))
  return `${t.getUTCFullYear()}-${pad2(t.getUTCMonth() + 1)}-${pad2(t.getUTCDate())}`
}

/** The days of a month ("2026-02" has 28). */
export function daysInMonth(month: string): number {
  const [y, m] = month.split('-').map(Number) as [number, number]
  return new Date(Date.UTC(y, m, 0)).getUTCDate()
}
