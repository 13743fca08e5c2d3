import type { Decision } from '../types.js'

export interface RateHeaderValues {
  limit: number
  remaining: number
  /** Unix seconds, rounded up. */
  resetSec: number
}

/**
 * SPEC §4: the three headers describe the window with the fewest calls left. On a refusal that
 * is a window at 0, and reset is when a call will be admitted again (the latest of the
 * refusing windows, since all must admit).
 */
export function rateHeaderValues(decision: Decision): RateHeaderValues | null {
  const ws = decision.windows
  if (ws.length === 0) return null
  if (!decision.allowed) {
    let pick = ws[0]!
    for (const w of ws) if (w.retryAtMs > pick.retryAtMs) pick = w
    return { limit: pick.limit, remaining: 0, resetSec: Math.ceil(pick.retryAtMs / 1000) }
  }
  let pick = ws[0]!
  for (let i = 1; i < ws.length; i++) {
    const w = ws[i]!
    if (w.remaining < pick.remaining || (w.remaining === pick.remaining && w.resetAtMs > pick.resetAtMs)) pick = w
  }
  return { limit: pick.limit, remaining: pick.remaining, resetSec: Math.ceil(pick.resetAtMs / 1000) }
}

/** Whole seconds until a refused call could be admitted, rounded up, at least 1. */
export function retryAfterSec(decision: Decision, nowMs: number): number {
  let at = 0
  for (const w of decision.windows) if (w.retryAtMs > at) at = w.retryAtMs
  return Math.max(1, Math.ceil((at - nowMs) / 1000))
}
