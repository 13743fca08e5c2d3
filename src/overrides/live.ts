import type { OverrideConfig } from '../types.js'

// SPEC §10: overrides changed through the admin API (`PUT` / `DELETE /v1/overrides/{name}`),
// shared through the store by every instance, over the file's.

/** An override the admin API put (whole), or the deletion of one the file names. */
export type LiveOverride = { override: OverrideConfig } | { deleted: true }

/**
 * The overrides in force: the file's in its order, each replaced by its admin version or
 * dropped by its deletion; then the admin API's new ones, by name.
 */
export function effectiveOverrides(
  file: readonly OverrideConfig[],
  live: ReadonlyMap<string, LiveOverride>
): OverrideConfig[] {
  const out: OverrideConfig[] = []
  const inFile = new Set<string>()
  for (const o of file) {
    inFile.add(o.name)
    const l = live.get(o.name)
    if (l === undefined) out.push(o)
    else if ('override' in l) out.push(l.override)
  }
  const added = [...live]
    .filter(([name, l]) => !inFile.has(name) && 'override' in l)
    .sort(([a], [b]) => a.localeCompare(b))
  for (const [, l] of added) out.push((l as { override: OverrideConfig }).override)
  return out
}
