import { readFileSync } from 'node:fs'
import { changedSettings, configView, type SettingChange } from './view.js'
import type { ChangeStore } from './changes.js'
import type { TeamChange } from '../quota/teams.js'
import type { Config, ConfigProblem } from '../types.js'
import { loadConfigFile, parseConfig } from './load.js'
import type { Flags } from './flags.js'
import { compileSnapshot, type Snapshot } from '../http/snapshot.js'
import type { LiveOverride } from '../overrides/live.js'
import { isLoopback } from './build.js'

export type ReloadResult =
  | {
      ok: true
      config: Config
      /** Each changed setting by its name in the file, with its old and new value (masked). */
      changes: SettingChange[]
      needsRestart: string[]
      /** Valid but surely not meant (a rule that can never match). */
      warnings: ConfigProblem[]
    }
  | { ok: false; problems: ConfigProblem[] }

/** Settings bound at start (sockets, pools, connections): a reload keeps the running values. */
const RESTART_ONLY = [
  'workers',
  'listen',
  'admin.host',
  'admin.port',
  'upstream.url',
  'upstream.maxConnections',
  'store',
] as const

function get(config: Config, path: string): unknown {
  return path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], config)
}

/** The new config with every restart-only setting kept at its running value. */
function keepRunning(running: Config, next: Config): { config: Config; needsRestart: string[] } {
  const needsRestart = RESTART_ONLY.filter(
    (p) => JSON.stringify(get(running, p)) !== JSON.stringify(get(next, p))
  )
  // SPEC §2: a reload never removes or empties a running admin.token (a half-written file,
  // the token line written last, must not open the admin API): that change needs a restart.
  const keepToken = running.admin.token !== '' && next.admin.token === ''
  const token = keepToken ? running.admin.token : next.admin.token
  const config: Config = {
    ...next,
    workers: running.workers,
    listen: running.listen,
    admin: { ...next.admin, host: running.admin.host, port: running.admin.port, token },
    upstream: {
      ...next.upstream,
      url: running.upstream.url,
      maxConnections: running.upstream.maxConnections,
    },
    store: running.store,
  }
  return { config, needsRestart: [...needsRestart, ...(keepToken ? ['admin.token'] : [])] }
}

/**
 * The running configuration: the file (with the flags over it) and the admin API's team
 * changes. A reload that fails validation changes nothing; one that passes swaps the snapshot
 * whole, so requests see the old or the new one, never a mix. Counters live in the store and
 * are kept. What is bound at start (listeners, upstream pool, store) keeps its running value
 * until a restart, and /v1/config shows what runs.
 */
export class ConfigHolder {
  private snap: Snapshot
  private teams: ReadonlyMap<string, TeamChange> = new Map()
  private live: ReadonlyMap<string, LiveOverride> = new Map()
  /** The environment variables the running file reads (a candidate may read these only). */
  private reads: readonly string[]

  constructor(
    readonly file: string,
    /** Loaded with the flags (loadConfigFile's `flags`), as every reload is. */
    config: Config,
    private readonly flags: Flags,
    /** The environment `${VAR}` is expanded from, at start and on every reload. */
    private readonly env: NodeJS.ProcessEnv = {}
  ) {
    this.snap = compileSnapshot(config, this.teams, this.live)
    this.reads = readsOf(file, env)
  }

  get current(): Snapshot {
    return this.snap
  }

  get teamChanges(): ReadonlyMap<string, TeamChange> {
    return this.teams
  }

  /**
   * SPEC §11: another file's text as it would run here: read with this process's environment,
   * and with the same team and override changes as the running one; or its problems.
   */
  candidate(
    text: string
  ): { ok: true; snapshot: Snapshot } | { ok: false; problems: ConfigProblem[] } {
    // SPEC §11 "Reading a candidate": the variables the running file reads, and no others
    // (a candidate naming ${REDIS_URL} when the running file does not gets it unset); no
    // problem it gets back says an expanded value.
    const env: NodeJS.ProcessEnv = {}
    for (const name of this.reads) if (this.env[name] !== undefined) env[name] = this.env[name]
    const r = parseConfig(text, env, 'candidate', {}, { candidate: true })
    if (!r.ok) return r
    return { ok: true, snapshot: compileSnapshot(r.config, this.teams, this.live) }
  }

  async reload(): Promise<ReloadResult> {
    const result = await loadConfigFile(this.file, this.env, this.flags)
    if (!result.ok) return result
    const running = this.snap.config
    const { config, needsRestart } = keepRunning(running, result.config)
    // Issue #11: a reload may never open an admin listener on a public address.
    if (config.admin.token === '' && !isLoopback(config.admin.host)) {
      const message = `cannot be emptied while the admin listener is on ${JSON.stringify(config.admin.host)} (not loopback)`
      return { ok: false, problems: [{ field: 'admin.token', message }] }
    }
    const changes = changedSettings(configView(running), configView(config))
    this.snap = compileSnapshot(config, this.teams, this.live)
    this.reads = result.reads
    return { ok: true, config, changes, needsRestart, warnings: result.warnings }
  }

  /**
   * A configuration another process validated (a worker takes its primary's reloads whole, so
   * every worker runs the same one even when the file changes again in between).
   */
  adopt(config: Config): void {
    this.snap = compileSnapshot(config, this.teams, this.live)
  }

  /**
   * Reads the team and override changes every instance shares from the store (throws when it
   * cannot).
   */
  async refreshTeams(store: Pick<ChangeStore, 'loadTeams' | 'loadOverrides'>): Promise<void> {
    const [teams, live] = await Promise.all([store.loadTeams(), store.loadOverrides()])
    this.live = live
    this.setTeamChanges(teams)
  }

  /**
   * The same, for a reader that keeps the last view while the store is down (the admin API's
   * reads): resolves to the error, or null.
   */
  async tryRefreshTeams(store: Pick<ChangeStore, 'loadTeams' | 'loadOverrides'>): Promise<unknown> {
    try {
      await this.refreshTeams(store)
      return null
    } catch (err) {
      return err ?? new Error('the store could not be read')
    }
  }

  /** SPEC §10: the admin API's overrides, by name. */
  get liveOverrides(): ReadonlyMap<string, LiveOverride> {
    return this.live
  }

  setTeamChanges(teams: ReadonlyMap<string, TeamChange>): void {
    this.teams = teams
    this.snap = compileSnapshot(this.snap.config, teams, this.live)
  }
}

/** The variables a file reads, as the running file was read (none when it cannot be read now). */
function readsOf(file: string, env: NodeJS.ProcessEnv): readonly string[] {
  try {
    const r = parseConfig(readFileSync(file, 'utf8'), env)
    return r.ok ? r.reads : []
  } catch {
    return []
  }
}
