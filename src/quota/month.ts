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
