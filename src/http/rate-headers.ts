import type { Charge, Decision } from '../types.js'

export interface RateHeaderValues {
  limit: number
  remaining: number
  /** Unix seconds, rounded up. */
  resetSec: number
}

/**
 * SPEC §4: the three headers describe the rate window with the fewest calls left. On a
 * refusal that is a window at 0, and reset is when a call will be admitted again (the latest
 * of the refusing windows, since all must admit). The monthly quota does not show until it
 * is used up; then remaining is 0 and reset is the start of the next month, and the limit
 * stays the rate window's (as the service's own headers do).
 */
export function rateHeaderValues(
  decision: Decision,
  charges?: readonly Charge[]
): RateHeaderValues | null {
  const ws = decision.windows
  let pick = -1
  for (let i = 0; i < ws.length; i++) {
    if (charges?.[i]?.kind === 'monthly') continue
    const w = ws[i]!
    if (pick === -1) {
      pick = i
      continue
    }
    const p = ws[pick]!
    const better =
      w.remaining < p.remaining ||
      (w.remaining === p.remaining &&
        (w.retryAtMs > p.retryAtMs || (w.retryAtMs === p.retryAtMs && w.resetAtMs > p.resetAtMs)))
    if (better) pick = i
  }
  let retryAt = 0
  for (const w of ws) if (w.retryAtMs > retryAt) retryAt = w.retryAtMs
  if (pick === -1) {
    // Only a monthly window: show it (no rate window to describe).
    if (ws.length === 0) return null
    const w = ws[0]!
    return decision.allowed
      ? { limit: w.limit, remaining: w.remaining, resetSec: Math.ceil(w.resetAtMs / 1000) }
      : { limit: w.limit, remaining: 0, resetSec: Math.ceil(retryAt / 1000) }
  }
  const p = ws[pick]!
  if (!decision.allowed)
    return { limit: p.limit, remaining: 0, resetSec: Math.ceil(retryAt / 1000) }
  return { limit: p.limit, remaining: p.remaining, resetSec: Math.ceil(p.resetAtMs / 1000) }
}

/** Whole seconds until a refused call could be admitted, rounded up, at least 1. */
export function retryAfterSec(decision: Decision, nowMs: number): number {
  let at = 0
  for (const w of decision.windows) if (w.retryAtMs > at) at = w.retryAtMs
  return Math.max(1, Math.ceil((at - nowMs) / 1000))
}
