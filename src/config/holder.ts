import type { TeamOverride } from '../quota/teams.js'
import type { Config, ConfigProblem } from '../types.js'
import { loadConfigFile } from './load.js'
import { applyOverrides, type FlagOverrides } from './overrides.js'
import { compileSnapshot, type Snapshot } from './snapshot.js'

/**
 * The running configuration: the file (with the flags over it) and the admin API's team
 * changes. A reload that fails validation changes nothing; one that passes swaps the snapshot
 * whole, so requests see the old or the new one, never a mix. Counters live in the store and
 * are kept.
 */
export class ConfigHolder {
  private snap: Snapshot
  private teams: ReadonlyMap<string, TeamOverride> = new Map()

  constructor(
    readonly file: string,
    config: Config,
    private readonly flags: FlagOverrides
  ) {
    this.snap = compileSnapshot(applyOverrides(config, flags), this.teams)
  }

  get current(): Snapshot {
    return this.snap
  }

  get teamOverrides(): ReadonlyMap<string, TeamOverride> {
    return this.teams
  }

  async reload(): Promise<{ ok: true; config: Config } | { ok: false; problems: ConfigProblem[] }> {
    const result = await loadConfigFile(this.file)
    if (!result.ok) return result
    this.snap = compileSnapshot(applyOverrides(result.config, this.flags), this.teams)
    return { ok: true, config: this.snap.config }
  }

  setTeamOverrides(teams: ReadonlyMap<string, TeamOverride>): void {
    this.teams = teams
    this.snap = compileSnapshot(this.snap.config, teams)
  }
}
