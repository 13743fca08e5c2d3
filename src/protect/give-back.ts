import type { GiveBack } from '../types.js'
import type { Admission } from '../http/call.js'

/**
 * SPEC §9: what an admitted call charged, as give-backs: one call from every window it was
 * charged to (class, rules, ip_ceiling, monthly), in the bucket of the decision's time (the
 * store's clock on Redis). A dry-run rule that was over was never charged; a call refused in
 * dry-run mode charged nothing; so neither is given back.
 */
export function chargedUses(admission: Admission): GiveBack[] {
  const d = admission.decision
  if (d === null || !d.allowed) return []
  const charges = admission.classification.charges
  const uses: GiveBack[] = []
  for (let i = 0; i < charges.length; i++) {
    const c = charges[i]!
    if (c.kind === 'rule' && c.dryRun && d.windows[i]!.retryAtMs !== 0) continue
    uses.push({ charge: c, units: 1, atMs: d.nowMs })
  }
  return uses
}
