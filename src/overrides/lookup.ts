import { firstCidrList } from '../request/client-ip.js'
import type { OverrideConfig } from '../types.js'

// SPEC §10: which override applies to a call, compiled once per snapshot (with the teams'
// bases) so a request pays one map lookup for its base and, when client overrides exist, one
// for its address (remembered; else one per prefix length in use). The first override that
// names a key wins; a base named directly wins over its team, and either over the client's
// network.

/** An override that applies, and the team a shared one counts under. */
export interface OverrideHit {
  o: OverrideConfig
  teamId: string | undefined
}

export interface OverrideLookup {
  /** Whether any override is configured (else the classifier skips the lookup). */
  readonly any: boolean
  find(uuid: string | null, clientIp: string): OverrideHit | null
  /** Every override in force, in order. */
  readonly all: readonly OverrideConfig[]
}

export function compileOverrides(
  list: readonly OverrideConfig[],
  /** Base UUID → its team's id (every team, whether monthly quotas are on or not). */
  teamOfBase: ReadonlyMap<string, { id: string }> = new Map()
): OverrideLookup {
  const byBase = new Map<string, OverrideHit>()
  for (const o of list)
    for (const b of o.bases) if (!byBase.has(b)) byBase.set(b, { o, teamId: undefined })
  const byTeam = new Map<string, OverrideConfig>()
  for (const o of list) for (const t of o.teams) if (!byTeam.has(t)) byTeam.set(t, o)
  // A base named directly keeps its override; the others of a named team take the team's.
  for (const [uuid, team] of teamOfBase) {
    const o = byTeam.get(team.id)
    if (o !== undefined && !byBase.has(uuid)) byBase.set(uuid, { o, teamId: team.id })
  }
  const byClient: OverrideHit[] = list
    .filter((o) => o.clients.length > 0)
    .map((o) => ({ o, teamId: undefined }))
  const clientList = firstCidrList(byClient.map((h) => h.o.clients))
  return {
    any: list.length > 0,
    all: list,
    find(uuid, clientIp) {
      if (uuid !== null) {
        const hit = byBase.get(uuid)
        if (hit !== undefined) return hit
      }
      if (byClient.length === 0) return null
      const i = clientList(clientIp)
      return i === -1 ? null : byClient[i]!
    },
  }
}

export const NO_OVERRIDES: OverrideLookup = compileOverrides([])
