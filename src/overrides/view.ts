import type { OverrideConfig } from '../types.js'

// SPEC §10: an override as limits.yaml writes it, for GET /v1/overrides and /v1/config.

/** An override as the file writes it, with where it comes from. */
export function overrideJson(o: OverrideConfig, source: 'file' | 'api') {
  const limits: Record<string, string[] | 'unlimited'> = {}
  for (const [cls, rates] of Object.entries(o.limits))
    limits[cls] = rates!.length === 0 ? 'unlimited' : rates!.map((r) => r.text)
  return {
    name: o.name,
    bases: o.bases,
    teams: o.teams,
    clients: o.clients,
    limits,
    shared: o.shared,
    mode: o.mode,
    source,
  }
}
