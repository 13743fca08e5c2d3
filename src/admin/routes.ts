import type { Clock } from '../clock.js'
import { Hono } from 'hono'
import type { ConfigHolder } from '../config/holder.js'
import type { Metrics } from '../observe/metrics.js'
import type { ChangeStore } from '../config/changes.js'
import type { ConfigProblem, Ledger, Logger, OnStoreError, StoreKind, Windows } from '../types.js'
import { bodyLimit } from 'hono/body-limit'
import { StoreError } from '../limiter/store-error.js'
import { bearerAuth } from './auth.js'
import { browserGuard, hostGuard } from './browser-guard.js'
import { historyRoutes } from './history.js'
import { MemoryReportStore, type ReportStore } from '../history/report-store.js'
import { configView } from '../config/view.js'
import type { ProtectState } from '../protect/protector.js'
import type { StatusCounts } from '../observe/status-recorder.js'
import { statusRoutes } from './status.js'
import { probeRoutes } from './probes.js'
import { creditRoutes, refreshMonthlyGauges, teamRoutes } from './teams.js'
import { usageRoutes } from './usage.js'
import { usageHistoryRoutes } from './usage-history.js'
import { createTuningSummary, tuningRoutes } from './tuning.js'
import { MemoryShapeStore, type ShapeStore } from '../tuning/shape-store.js'
import { MemoryUsageStore, type UsageStore } from '../usage/store.js'
import { overrideRoutes } from './overrides.js'
import type { StoreStateView } from './probes.js'

// SPEC §7: the admin listener. JSON answers; errors `{"error_msg": ...}`.

/** A listener built without a usage store (tests) reads an empty one. */
const NO_USAGE: UsageStore = new MemoryUsageStore()

/** The admin GET paths without parameters (deploy probes and scrapes must use these). */
export const ADMIN_PATHS = [
  '/healthz',
  '/readyz',
  '/metrics',
  '/v1/teams',
  '/v1/config',
  '/v1/protect',
] as const

const MAX_ADMIN_BODY = 1_048_576

export interface AdminDeps {
  holder: ConfigHolder
  /** The rate windows (peeks for usage and the month's count, ready() for the probes). */
  store: Windows
  /** SPEC §5: the team-months (credits, reads). */
  ledger: Ledger
  changes: ChangeStore
  metrics: Metrics
  /** Re-reads the config file (the same path as SIGHUP and a file change). */
  reload: () => Promise<{ ok: true } | { ok: false; problems: ConfigProblem[] }>
  storeKind?: StoreKind
  /** SPEC §7: the store's state (observe/store-state.ts); without it, the store's ready(). */
  storeState?: StoreStateView
  draining?: () => boolean
  /** Every time the admin API reads (the system's clock by default). */
  clock: Clock
  /** SPEC §8: the server's version in force, the report's counters and this instance's flush. */
  history?: { serverVersion: () => string | null; report: ReportStore; flush: () => Promise<void> }
  /** SPEC §9: the server protection's state (this process's, or its workers' summed). */
  protect?: () => Promise<ProtectState | null>
  /** SPEC §7: the status page's counts (this process's, or its workers' merged), and its facts. */
  status?: { counts: () => Promise<StatusCounts>; version: string; startedMs: number }
  /** SPEC §5: calls per day (the shared store's), and this instance's last interval written first. */
  usage?: UsageStore
  /** SPEC §11: how keys' calls fell in time (the shared store's). */
  shapes?: ShapeStore
  flushUsage?: () => Promise<void>
  /** Admin actions that change counts log a line (a credit). */
  logger?: Logger
  /** A primary's view of its worker processes (`workers` > 1). */
  workers?: { serving: () => number; renderMetrics: () => Promise<string> }
}

/** SPEC §7: the status page and its JSON, where the process gave what they show. */
function statusRoute(
  app: Hono,
  deps: AdminDeps,
  history: Parameters<typeof statusRoutes>[1]['history'],
  now: () => number,
  clock: Clock
): void {
  if (deps.status === undefined) return
  const tuning = createTuningSummary({
    holder: deps.holder,
    shapes: deps.shapes ?? new MemoryShapeStore(),
    now,
    flush: deps.flushUsage ?? (async () => {}),
  })
  statusRoutes(app, {
    tuning,
    ...deps.status,
    holder: deps.holder,
    store: deps.store,
    ledger: deps.ledger,
    storeKind: deps.storeKind ?? 'memory',
    storeState: deps.storeState,
    now,
    clock,
    usage: deps.usage ?? NO_USAGE,
    protect: async () => (await deps.protect?.()) ?? null,
    history,
    workers: () => deps.workers?.serving() ?? 1,
  })
}

/** SPEC §9: what /metrics shows of the server's protection, as JSON. */
function protectRoute(app: Hono, protect: AdminDeps['protect']): void {
  app.get('/v1/protect', async (c) => {
    const state = (await protect?.()) ?? null
    if (state === null) return c.json({ error_msg: 'no proxy process is serving' }, 503)
    return c.json(state)
  })
}

/** What every admin call passes first: the browser guard, the token, the body cap. */
function guards(app: Hono, holder: ConfigHolder): void {
  // SPEC §7: cross-site state changes refused, and no answer cached, before anything else;
  // without a token, only calls sent to a loopback name (DNS rebinding).
  app.use('*', browserGuard())
  app.use(
    '*',
    hostGuard(() => holder.current.config.admin.token)
  )
  app.use(
    '*',
    bearerAuth(() => holder.current.config.admin.token)
  )
  // Issue #11, #22: admin bodies are small JSON; a larger one is 413, by its declared length or,
  // chunked, as soon as it passes the cap (hono's bodyLimit reads it before the route runs).
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_ADMIN_BODY,
      // SPEC §11: a candidate over the bound is a 400 naming it (it is the candidate's problem).
      onError: (c) =>
        c.req.path === '/v1/tuning'
          ? c.json({ error_msg: `the candidate is over ${MAX_ADMIN_BODY} bytes (1 MiB)` }, 400)
          : c.json({ error_msg: `the body is over ${MAX_ADMIN_BODY} bytes` }, 413),
    })
  )
}

/** SPEC §5, §10, §11: teams and credits, usage and its history, overrides, tuning. */
function dataRoutes(app: Hono, deps: AdminDeps, now: () => number): void {
  const { holder, store, ledger } = deps
  teamRoutes(app, { holder, store, ledger, changes: deps.changes, now, logger: deps.logger })
  creditRoutes(app, { holder, store, ledger, changes: deps.changes, now, logger: deps.logger })
  usageRoutes(app, { holder, store, now })
  usageHistoryRoutes(app, {
    holder,
    store,
    ledger,
    usage: deps.usage ?? NO_USAGE,
    now,
    flush: deps.flushUsage ?? (async () => {}),
  })
  overrideRoutes(app, { holder, changes: deps.changes })
  tuningRoutes(app, {
    holder,
    ledger,
    shapes: deps.shapes ?? new MemoryShapeStore(),
    now,
    flush: deps.flushUsage ?? (async () => {}),
  })
}

export function createAdminApp(deps: AdminDeps): Hono {
  const { holder, store, metrics } = deps
  const clock = deps.clock
  const now = () => clock.now()
  const app = new Hono()
  guards(app, holder)

  probeRoutes(app, {
    store,
    storeState: deps.storeState,
    metrics,
    storeKind: deps.storeKind ?? 'memory',
    onError: (): OnStoreError => holder.current.config.store.onError,
    draining: deps.draining ?? (() => false),
    workersServing: deps.workers?.serving,
    renderMetrics: deps.workers?.renderMetrics,
    beforeScrape: () =>
      refreshMonthlyGauges(
        { holder, store, ledger: deps.ledger, changes: deps.changes, now },
        metrics
      ),
  })
  dataRoutes(app, deps, now)
  const history = deps.history ?? {
    serverVersion: () => null,
    report: new MemoryReportStore(),
    flush: async () => {},
  }
  historyRoutes(app, { ...history, now })

  app.post('/v1/reload', async (c) => {
    const r = await deps.reload()
    if (!r.ok) {
      const problems = r.problems.map((p) => `${p.field}: ${p.message}`)
      return c.json(
        { error_msg: 'the configuration was refused; the running one stays', problems },
        400
      )
    }
    const cfg = holder.current.config
    return c.json({
      reloaded: true,
      file: holder.file,
      deployment: cfg.deployment,
      mode: cfg.mode,
      teams: holder.current.teams.length,
    })
  })

  protectRoute(app, deps.protect)
  statusRoute(app, deps, { ...history, now }, now, clock)
  app.get('/v1/config', (c) => {
    const config = configView(holder.current.config)
    // SPEC §8: the version in force (auto shows what /server-info/ said, or null).
    return c.json({
      ...config,
      server: { ...holder.current.config.server, in_force: history.serverVersion() },
    })
  })

  app.notFound((c) => c.json({ error_msg: 'not found' }, 404))
  app.onError((err, c) => {
    const storeDown = err instanceof StoreError
    return c.json(
      { error_msg: storeDown ? 'the store is unavailable' : 'internal error' },
      storeDown ? 503 : 500
    )
  })
  return app
}
