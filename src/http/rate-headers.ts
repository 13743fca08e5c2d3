import type { Charge, Decision } from '../types.js'

export interface RateHeaderValues {
  limit: number
  remaining: number
  /** Unix seconds, rounded up. */
  resetSec: number
}

/** Windows that show in the headers: not the monthly quota (until used up), not a dry-run rule. */
function shows(c: Charge | undefined): boolean {
  return c === undefined || (c.kind !== 'monthly' && !(c.kind === 'rule' && c.dryRun))
}

/** Windows that can refuse: every one but a dry-run rule. */
function enforced(c: Charge | undefined): boolean {
  return c === undefined || !(c.kind === 'rule' && c.dryRun)
}

/** When every refusing window admits again (ms); 0 when none refuses. */
function retryAtOf(decision: Decision, charges?: readonly Charge[]): number {
  let at = 0
  const ws = decision.windows
  for (let i = 0; i < ws.length; i++) {
    if (enforced(charges?.[i]) && ws[i]!.retryAtMs > at) at = ws[i]!.retryAtMs
  }
  return at
}

/**
 * SPEC §4: the three headers describe the rate window with the fewest calls left. On a
 * refusal that is a window at 0, and reset is when a call will be admitted again (the latest
 * of the refusing windows, since all must admit). The monthly quota does not show until it
 * is used up; then remaining is 0 and reset is the start of the next month, and the limit
 * stays the rate window's (as the service's own headers do). A dry-run rule never shows: its
 * clients are not to notice it.
 */
export function rateHeaderValues(
  decision: Decision,
  charges?: readonly Charge[]
): RateHeaderValues | null {
  const ws = decision.windows
  let pick = -1
  for (let i = 0; i < ws.length; i++) {
    if (!shows(charges?.[i])) continue
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
  const retryAt = retryAtOf(decision, charges)
  if (pick === -1) {
    // Only a monthly window (or dry-run rules): show the first enforced one.
    const first = ws.findIndex((_, i) => enforced(charges?.[i]))
    if (first === -1) return null
    const w = ws[first]!
    return decision.allowed
      ? { limit: w.limit, remaining: w.remaining, resetSec: Math.ceil(w.resetAtMs / 1000) }
      : { limit: w.limit, remaining: 0, resetSec: Math.ceil(retryAt / 1000) }
  }
  const p = ws[pick]!
  if (!decision.allowed)
    return { limit: p.limit, remaining: 0, resetSec: Math.ceil(retryAt / 1000) }
  return { limit: p.limit, remaining: p.remaining, resetSec: Math.ceil(p.resetAtMs / 1000) }
}

/** Whole seconds until a refused call could be admitted, rounded up, at least 1 (on the decision's clock). */
export function retryAfterSec(decision: Decision, charges?: readonly Charge[]): number {
  return Math.max(1, Math.ceil((retryAtOf(decision, charges) - decision.nowMs) / 1000))
}

/** The dry-run rules a decision found over their limit (SPEC §2: logged, never refused). */
export function shadowRulesOver(decision: Decision, charges: readonly Charge[]): string[] {
  const out: string[] = []
  for (let i = 0; i < charges.length; i++) {
    const c = charges[i]!
    if (c.kind === 'rule' && c.dryRun && decision.windows[i]!.retryAtMs !== 0) out.push(c.rule)
  }
  return out
}
