import { serializeList, type Item } from 'structured-headers'
import type { Charge, Decision } from '../types.js'

// SPEC §10: the IETF draft's fields (draft-ietf-httpapi-ratelimit-headers-11), as RFC 9651
// structured fields, serialised by structured-headers (a library, not string building):
//   RateLimit-Policy: "base";q=500;w=60, "monthly";q=120000;w=2592000
//   RateLimit: "base";r=499;t=60, "monthly";r=119000;t=864000
// Every policy of the call is listed, the monthly one too before it runs out (which
// x-ratelimit-* cannot show). A dry-run rule is not: its clients are not to notice it.

/** The policy's name: the class, an override's or a rule's name, `ip_ceiling`, or `monthly`. */
export function policyName(c: Charge): string {
  if (c.kind === 'monthly') return 'monthly'
  if (c.kind === 'rule') return c.rule
  if (c.kind === 'ip_ceiling') return 'ip_ceiling'
  return c.override ?? c.cls
}

const ceilSec = (ms: number) => Math.max(0, Math.ceil(ms / 1000))

export interface IetfFields {
  'ratelimit-policy': string
  ratelimit: string
}

/**
 * The two fields for a decision on these charges (same order), on the decision's clock. A
 * class or rule with several windows names each after its window (`base-3600`) past the
 * first; `monthStartMs` sizes the monthly policy's window (this month's length).
 */
export function ietfFields(
  decision: Decision,
  charges: readonly Charge[],
  monthStartMs: (endMs: number) => number
): IetfFields | null {
  const policies: Item[] = []
  const states: Item[] = []
  const seen = new Set<string>()
  for (let i = 0; i < charges.length; i++) {
    const c = charges[i]!
    if (c.kind === 'rule' && c.dryRun) continue
    const w = decision.windows[i]!
    // A window the decision did not read (a cached refusal) is not claimed full and unused.
    if (w.unknown === true) continue
    let name = policyName(c)
    const windowSec =
      c.kind === 'monthly' ? ceilSec(c.endMs - monthStartMs(c.endMs)) : ceilSec(c.windowMs)
    if (seen.has(name)) name = `${name}-${windowSec}`
    seen.add(name)
    const refusing = w.retryAtMs !== 0
    const remaining = refusing ? 0 : w.remaining
    // Seconds until more calls fit: a refusing window's retry time, else when its oldest call
    // leaves (a calendar window: its end).
    const untilMs = refusing ? w.retryAtMs : w.resetAtMs
    const t = ceilSec(untilMs - decision.nowMs)
    policies.push([
      name,
      new Map([
        ['q', w.limit],
        ['w', windowSec],
      ]),
    ])
    states.push([
      name,
      new Map([
        ['r', remaining],
        ['t', t],
      ]),
    ])
  }
  if (policies.length === 0) return null
  return { 'ratelimit-policy': serializeList(policies), ratelimit: serializeList(states) }
}
