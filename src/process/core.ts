import { sleep, type Clock } from '../clock.js'
import { storeAddress } from '../limiter/redis-client.js'
import { version } from '../version.js'
import type { Cli } from './runtime.js'
import { ConfigHolder } from '../config/holder.js'
import { createStore, type Stores } from '../deps.js'
import { ServerVersion } from '../history/server-version.js'
import type { Logger } from '../observe/log.js'
import { Metrics } from '../observe/metrics.js'
import { UsageSummary } from '../observe/summary.js'
import { StatusRecorder } from '../observe/status-recorder.js'
import { startTracing, type Tracing } from '../observe/tracing.js'
import type { Config } from '../types.js'
import type { Runtime } from './runtime.js'
import { TroubleLog } from '../observe/trouble.js'
import { instanceId } from '../batch/recorder.js'
import { StoreState } from '../observe/store-state.js'

// What every basegate process holds, whatever its role (serving alone, a primary, a worker).

const STORE_WAIT_MS = 5_000

export interface Core {
  file: string
  runtime: Runtime
  logger: Logger
  metrics: Metrics
  summary: UsageSummary
  /** SPEC §7: the status page's last 15 minutes. */
  status: StatusRecorder
  startedMs: number
  /** Issue #25: traces, when an OTLP endpoint is configured (else null). */
  tracing: Tracing | null
  holder: ConfigHolder
  stores: Stores
  serverVersion: ServerVersion
  draining: boolean
  reload(source: string): ReturnType<ConfigHolder['reload']>
  /** Run after every reload that applied (the proxy re-reads its TLS files). */
  afterReload: (() => void)[]
  /** Store trouble, said once a minute per kind and once when it is over (issue #40 item 9). */
  trouble: TroubleLog
  /** This process's id in the store's batches (batch/recorder.ts). */
  instance: string
  /** SPEC §7: the store's state (failing or answering, its episodes), probed every 5 s. */
  storeState: StoreState
}

/** Team and override changes made through any instance's admin API (kept in the store). */
export async function refreshTeams(
  core: Pick<Core, 'holder' | 'stores' | 'trouble'>
): Promise<void> {
  const err = await core.holder.tryRefreshTeams(core.stores.changes)
  const what = 'team changes could not be read from the store'
  if (err !== null) core.trouble.failed(what, 'the last ones read (or the file values) apply', err)
  else core.trouble.back(what, 'they are read again')
}

/**
 * Issue #11: a fresh instance takes no traffic before its store answers (or STORE_WAIT_MS
 * passed: then it starts limiting alone under `on_error: open`, or answering 503 under
 * `closed`, and says so).
 */
async function waitForStore(
  stores: Stores,
  config: Config,
  logger: Logger,
  clock: Clock
): Promise<void> {
  if (stores.kind === 'memory') return
  const deadline = clock.monotonic() + STORE_WAIT_MS
  while (clock.monotonic() < deadline) {
    if (await stores.windows.ready()) return
    await sleep(clock, 100)
  }
  const store = storeAddress(config.store)
  const error = stores.connectionError()
  logger.warn(
    { waited_ms: STORE_WAIT_MS, store, error },
    `the store does not answer yet (${store}: ${error ?? 'no answer'}); serving without it`
  )
}

/** A reload from any source: applied and logged, or refused with every problem named. */
function reloader(core: Omit<Core, 'reload'>, onApplied: (config: Config) => void): Core['reload'] {
  const { holder, metrics, logger, file } = core
  return async (source) => {
    const r = await holder.reload()
    metrics.countReload(r.ok)
    if (!r.ok) {
      const problems = r.problems.map((p) => `${p.field}: ${p.message}`)
      logger.error({ file, source, problems }, 'configuration refused; the running one stays')
      return r
    }
    onApplied(holder.current.config)
    for (const f of core.afterReload) f()
    logger.info({ file, source, changes: r.changes }, 'configuration reloaded')
    // A changed server.version takes effect now; under auto, the upstream is asked again.
    void core.serverVersion.refresh()
    for (const w of r.warnings) logger.warn({ field: w.field }, w.message)
    if (r.needsRestart.length > 0) {
      logger.warn(
        { fields: r.needsRestart },
        'these changes take effect after a restart; the running values stay'
      )
    }
    return r
  }
}

/** The parts every role has: config, store, metrics, the server's version, the report. */
export async function bootCore(
  cli: Cli,
  config: Config,
  runtime: Runtime,
  logger: Logger,
  onApplied: (config: Config) => void = () => {}
): Promise<Core> {
  const metrics = new Metrics({ version: version() })
  const holder = new ConfigHolder(cli.file, config, cli.flags, runtime.env)
  let storeState: StoreState | null = null
  const stores = createStore(config, logger, runtime.clock, metrics, (e) => storeState?.seen(e))
  storeState = new StoreState({
    kind: stores.kind,
    probe: () => stores.probe(),
    clock: runtime.clock,
    logger,
    address: storeAddress(config.store),
    onError: () => holder.current.config.store.onError,
  })
  metrics.watchStore(() => storeState!.up)
  const serverVersion = new ServerVersion({
    configured: () => holder.current.config.server.version,
    upstreamUrl: config.upstream.url,
    logger,
    onChange: (v) => metrics.setServerVersion(v),
    pollMs: runtime.serverInfoMs,
    clock: runtime.clock,
  })
  const parts = {
    file: cli.file,
    runtime,
    logger,
    metrics,
    summary: new UsageSummary(runtime.clock, 10, 100_000),
    status: new StatusRecorder((failing, view) => {
      // Issue #41: the server's trouble in the log too, as it starts and as it ends.
      if (failing)
        logger.warn(
          { since: view.since_ms, error: view.error },
          'the server is failing (5xx, 502, 504)'
        )
      else if (view.last !== null) {
        const lastedS = view.last.lasted_s
        logger.info(
          { since: view.last.start_ms, lasted_s: lastedS, error: view.last.error },
          `the server answers again after ${lastedS} s of failures`
        )
      }
    }),
    tracing: await startTracing(runtime.env, version()),
    startedMs: runtime.clock.now(),
    holder,
    stores,
    serverVersion,
    draining: false,
    afterReload: [] as (() => void)[],
    trouble: new TroubleLog({
      logger,
      store: storeAddress(config.store),
      connectionError: () => stores.connectionError(),
      clock: runtime.clock,
    }),
    instance: instanceId(),
    storeState,
  }
  const core: Core = Object.assign(parts, { reload: reloader(parts, onApplied) })
  metrics.watchUpstream(() => core.status.upstreamHealth().state === 'ok')
  await waitForStore(stores, config, logger, runtime.clock)
  storeState.start()
  await refreshTeams(core)
  stores.changes.onChange(() => void refreshTeams(core))
  serverVersion.start()
  return core
}

/** The store connections and timers, after the traffic has stopped. */
export async function closeCore(core: Core): Promise<void> {
  core.serverVersion.stop()
  core.storeState.stop()
  await core.tracing?.shutdown()
  await core.stores.changes.close().catch(() => {})
  await core.stores.windows.close().catch(() => {})
}
