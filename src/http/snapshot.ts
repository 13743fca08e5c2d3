import { compileClassifier, type Classifier } from './classify.js'
import { cidrMatcher, createClientIpResolver, type ClientIpResolver } from '../request/client-ip.js'
import { effectiveTeams, teamsByBase, type Team, type TeamChange } from '../quota/teams.js'
import type { Config } from '../types.js'
import { compileOverrides, type OverrideLookup } from '../overrides/lookup.js'
import { effectiveOverrides, type LiveOverride } from '../overrides/live.js'

/**
 * Everything that depends only on the configuration (and the admin API's team changes),
 * compiled once per change. A request reads the snapshot once, so a reload never tears a
 * request in two.
 */
export interface Snapshot {
  config: Config
  classifier: Classifier
  clientIp: ClientIpResolver
  /** SPEC §2 allow.clients: whether a client is never limited. */
  allowClient: (ip: string) => boolean
  teams: readonly Team[]
  /** Each base's team (a base is in at most one). */
  teamOfBase: ReadonlyMap<string, Team>
  /** SPEC §10: the overrides in force (the file's, with the admin API's changes). */
  overrides: OverrideLookup
  /**
   * SPEC §4: a key kept whatever its calls (`base:<uuid>` of a team, of allow.bases or of an
   * override; `ip:<key>` of a client an override lists): its days, report and evidence by name.
   */
  known: (key: string) => boolean
}

/** SPEC §4: the keys the file and the admin API name, kept by name whatever their calls. */
function knownKeys(
  config: Config,
  teamOfBase: ReadonlyMap<string, Team>,
  overrides: OverrideLookup
): (key: string) => boolean {
  const bases = new Set(config.allow.bases)
  const clients = overrides.all.some((o) => o.clients.length > 0)
  return (key) => {
    if (key.startsWith('base:')) {
      const uuid = key.slice(5)
      return bases.has(uuid) || teamOfBase.has(uuid) || overrides.find(uuid, '') !== null
    }
    if (!clients || !key.startsWith('ip:')) return false
    // A client's key is its address, or its IPv6 prefix (`2001:db8::/64`): its first address.
    const slash = key.indexOf('/')
    const ip = slash === -1 ? key.slice(3) : key.slice(3, slash)
    return overrides.find(null, ip) !== null
  }
}

export function compileSnapshot(
  config: Config,
  teamChanges: ReadonlyMap<string, TeamChange> = new Map(),
  live: ReadonlyMap<string, LiveOverride> = new Map()
): Snapshot {
  const teams = effectiveTeams(config, teamChanges)
  const byBase = teamsByBase(teams)
  const limits = compileOverrides(effectiveOverrides(config.overrides, live), byBase)
  return {
    config,
    overrides: limits,
    classifier: compileClassifier(config, byBase, limits),
    clientIp: createClientIpResolver(config.clientIp),
    allowClient: cidrMatcher(config.allow.clients),
    teams,
    teamOfBase: byBase,
    known: knownKeys(config, byBase, limits),
  }
}
