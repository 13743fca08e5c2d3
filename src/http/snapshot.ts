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
  }
}
