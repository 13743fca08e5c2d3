import { z } from 'zod'
import type { ConfigProblem, Rate, RateList } from '../types.js'

// Rates as limits.yaml writes them (`500/min`, `unlimited`, a list of them): the parser, the
// schema the file is checked with, and the check of a list (SPEC §2). Config and overrides
// both read rates; the limiter counts them.

const UNIT_MS: Record<string, number> = {
  s: 1_000,
  sec: 1_000,
  second: 1_000,
  min: 60_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
}

const RATE_RE = /^\s*(\d+)\s*\/\s*([a-z]+)\s*$/i

/**
 * Parses "500/min" into a Rate; "unlimited" gives null; anything else undefined.
 * SPEC §2: N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited.
 */
export function parseRate(text: string): Rate | null | undefined {
  if (text.trim().toLowerCase() === 'unlimited') return null
  const m = RATE_RE.exec(text)
  if (!m) return undefined
  const limit = Number(m[1])
  const windowMs = UNIT_MS[m[2]!.toLowerCase()]
  // A zero limit would refuse everything; an operator means "block", which is not a rate.
  if (windowMs === undefined || !Number.isSafeInteger(limit) || limit < 1) return undefined
  return { limit, windowMs, text: text.trim() }
}

/** A word in any case, spelled out so the pattern needs no flags (JSON Schema has none). */
const anyCase = (w: string) => [...w].map((c) => `[${c.toLowerCase()}${c.toUpperCase()}]`).join('')
const UNITS = ['second', 'sec', 's', 'minute', 'min', 'hour', 'day'].map(anyCase).join('|')
/** N/unit with N ≥ 1, or unlimited: the same language as parseRate. */
export const RATE_PATTERN = `^\\s*(?:${anyCase('unlimited')}|0*[1-9][0-9]*\\s*/\\s*(?:${UNITS}))\\s*$`

/** The rate language, said where a value is not in it. */
const RATE_FORMS = 'write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited'

const rateText = z
  .string()
  .regex(new RegExp(RATE_PATTERN), {
    error: (iss) => `${JSON.stringify(iss.input)} is not a rate (${RATE_FORMS})`,
    abort: true,
  })
  // Past the pattern, only a number too large to count exactly is left to refuse.
  .refine((s) => parseRate(s) !== undefined, {
    error: (iss) => `${JSON.stringify(iss.input)} is not a rate (${RATE_FORMS})`,
  })
  .describe(RATE_FORMS)

/** A rate, or a non-empty list of rates that all apply. */
export const rateValue = z.union([rateText, z.array(rateText).min(1)])

function rates(value: string | string[]): RateList {
  const list = Array.isArray(value) ? value : [value]
  // The schema has already proven each entry parses; unlimited entries drop out.
  return list.map(parseRate).filter((r): r is NonNullable<typeof r> => r != null)
}

/**
 * SPEC §2: two rates with the same window in one list are an error (`[100/min, 50/min]`):
 * they would share one counter and charge each call twice.
 */
export function checkedRates(
  problems: ConfigProblem[],
  field: string,
  value: string | string[]
): RateList {
  const list = rates(value)
  const seen = new Set<number>()
  for (const r of list) {
    if (seen.has(r.windowMs)) {
      problems.push({
        field,
        message: `${JSON.stringify(value)} has two rates with a window of ${r.windowMs / 1000} s; keep one (the lower)`,
      })
      break
    }
    seen.add(r.windowMs)
  }
  return list
}
