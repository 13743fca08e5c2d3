import type { Rate } from '../types.js'

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
