import type { Config, ConfigProblem } from '../types.js'
import { loadConfigFile } from './load.js'
import { applyOverrides, type FlagOverrides } from './overrides.js'
import { compileSnapshot, type Snapshot } from './snapshot.js'

/**
 * The running configuration. A reload that fails validation changes nothing; one that passes
 * swaps the snapshot whole, so requests see the old or the new one, never a mix. Counters
 * live in the store and are kept.
 */
export class ConfigHolder {
  private snap: Snapshot

  constructor(
    readonly file: string,
    config: Config,
    private readonly overrides: FlagOverrides
  ) {
    this.snap = compileSnapshot(applyOverrides(config, overrides))
  }

  get current(): Snapshot {
    return this.snap
  }

  async reload(): Promise<{ ok: true; config: Config } | { ok: false; problems: ConfigProblem[] }> {
    const result = await loadConfigFile(this.file)
    if (!result.ok) return result
    this.snap = compileSnapshot(applyOverrides(result.config, this.overrides))
    return { ok: true, config: this.snap.config }
  }
}
