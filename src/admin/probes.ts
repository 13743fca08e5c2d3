import type { Hono } from 'hono'
import type { HealthView } from '../observe/health.js'
import type { Metrics } from '../observe/metrics.js'
import type { OnStoreError, StoreKind, Windows } from '../types.js'

/** The store's state as the admin API reads it (observe/store-state.ts). */
export interface StoreStateView {
  /** Probes now (a write): whether the store took it; the result feeds the state. */
  check(): Promise<boolean>
  readonly up: boolean
  view(): HealthView
  /** Since when a check has gone unanswered, if one is out. */
  unansweredSince(): number | null
}

/**
 * Whether the store answers now: a live probe (a write), and the state not failing. Without a
 * state (tests of the admin app alone), the store's own ready().
 */
export async function storeUp(
  store: Pick<Windows, 'ready'>,
  state: StoreStateView | undefined
): Promise<boolean> {
  if (state === undefined) return store.ready()
  const live = await state.check()
  return live && state.up
}

export interface ProbeDeps {
  store: Windows
  storeState?: StoreStateView
  metrics: Metrics
  storeKind: StoreKind
  onError: () => OnStoreError
  /** True from SIGTERM on: the instance takes no new traffic. */
  draining: () => boolean
  /** Refreshes gauges read at scrape time (monthly usage). */
  beforeScrape?: () => Promise<void>
  /** The exposition, when it is more than this process's registry (a primary and its workers). */
  renderMetrics?: () => Promise<string>
  /** With worker processes: how many serve now (none: the instance cannot take traffic). */
  workersServing?: () => number
}

/**
 * SPEC §7 probes: /healthz while the process serves; /readyz while this instance can serve. A
 * store that is down does not make an `on_error: open` instance unready (it limits alone);
 * with `closed` it answers 503 to every call, so it is taken out. Neither reveals anything.
 */
export function probeRoutes(app: Hono, deps: ProbeDeps): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }))
  app.get('/readyz', async (c) => {
    if (deps.draining()) return c.json({ status: 'draining', store: 'unknown' }, 503)
    if (deps.workersServing?.() === 0) return c.json({ status: 'unready', workers: 0 }, 503)
    if (deps.storeKind === 'memory') return c.json({ status: 'ready', store: 'memory' })
    const up = await storeUp(deps.store, deps.storeState)
    const ready = up || deps.onError() === 'open'
    return c.json(
      { status: ready ? 'ready' : 'unready', store: up ? 'up' : 'down' },
      ready ? 200 : 503
    )
  })
  app.get('/metrics', async (c) => {
    await deps.beforeScrape?.()
    const text = await (deps.renderMetrics?.() ?? deps.metrics.registry.metrics())
    return c.body(text, 200, { 'content-type': deps.metrics.registry.contentType })
  })
}
