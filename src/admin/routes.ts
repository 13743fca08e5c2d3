import { Hono, type Context } from 'hono'
import ipaddr from 'ipaddr.js'
import type { ConfigHolder } from '../config/holder.js'
import { parseUuid } from '../http/base-uuid.js'
import type { Metrics } from '../observe/metrics.js'
import type { OverrideStore } from '../quota/overrides.js'
import {
  windowMsOf,
  type Charge,
  type ConfigProblem,
  type LimiterStore,
  type OnStoreError,
  type WindowState,
} from '../types.js'
import { bearerAuth, bodyCap } from './auth.js'
import { historyRoutes } from './history.js'
import { MemoryReportStore, type ReportStore } from '../history/report-store.js'
import { maskedConfig } from './mask.js'
import { probeRoutes } from './probes.js'
import { monthOf, teamRoutes } from './teams.js'

// SPEC §7: the admin listener. JSON answers; errors `{"error_msg": ...}`.

/** The admin GET paths without parameters (deploy probes and scrapes must use these). */
export const ADMIN_PATHS = ['/healthz', '/readyz', '/metrics', '/v1/teams', '/v1/config'] as const

const MAX_ADMIN_BODY = 1_048_576

export interface AdminDeps {
  holder: ConfigHolder
  store: LimiterStore
  overrides: OverrideStore
  metrics: Metrics
  /** Re-reads the config file (the same path as SIGHUP and a file change). */
  reload: () => Promise<{ ok: true } | { ok: false; problems: ConfigProblem[] }>
  storeKind?: 'memory' | 'redis' | 'cluster'
  draining?: () => boolean
  now?: () => number
  /** SPEC §8: the server's version in force, the report's counters and this instance's flush. */
  history?: { serverVersion: () => string | null; report: ReportStore; flush: () => Promise<void> }
}

function windowJson(charge: Charge, w: WindowState) {
  return {
    class: charge.cls,
    ...(charge.kind === 'rule' ? { rule: charge.rule } : {}),
    ...(charge.kind === 'ip_ceiling' ? { ip_ceiling: true } : {}),
    limit: w.limit,
    window_s: windowMsOf(charge) / 1000,
    used: w.used,
    remaining: w.remaining,
    reset: Math.ceil(w.resetAtMs / 1000),
  }
}

export function createAdminApp(deps: AdminDeps): Hono {
  const { holder, store, metrics } = deps
  const now = deps.now ?? Date.now
  const app = new Hono()
  app.use(
    '*',
    bearerAuth(() => holder.current.config.admin.token)
  )
  app.use('*', bodyCap(MAX_ADMIN_BODY))

  probeRoutes(app, {
    store,
    metrics,
    storeKind: deps.storeKind ?? 'memory',
    onError: (): OnStoreError => holder.current.config.store.onError,
    draining: deps.draining ?? (() => false),
    beforeScrape: refreshMonthlyGauges,
  })
  teamRoutes(app, { holder, store, overrides: deps.overrides, now })
  usageRoutes(app)
  const history = deps.history ?? {
    serverVersion: () => null,
    report: new MemoryReportStore(),
    flush: async () => {},
  }
  historyRoutes(app, { ...history, now })

  async function refreshMonthlyGauges(): Promise<void> {
    const snap = holder.current
    if (!snap.config.monthly.enabled) return
    for (const team of snap.teams) {
      try {
        const m = await monthOf({ holder, store, overrides: deps.overrides, now }, team)
        metrics.monthlyUsed.set({ team: team.id }, m.used)
        metrics.monthlyQuota.set({ team: team.id }, m.quota)
      } catch {
        // The store is down: the gauges keep their last values; the store metrics say why.
      }
    }
  }

  function usageRoutes(app: Hono): void {
    async function usage(c: Context, key: string, charges: Charge[]) {
      const d = await store.peek(charges, now())
      const windows = []
      let monthly = null
      for (let i = 0; i < charges.length; i++) {
        const ch = charges[i]!
        const w = d.windows[i]!
        if (ch.kind === 'monthly') {
          monthly = {
            team: ch.team,
            quota: w.limit,
            used: w.used,
            reset: Math.ceil(w.resetAtMs / 1000),
          }
        } else windows.push(windowJson(ch, w))
      }
      return c.json({ key, windows, monthly })
    }
    app.get('/v1/usage/base/:uuid', async (c) => {
      const uuid = parseUuid(c.req.param('uuid'))
      if (uuid === null)
        return c.json(
          { error_msg: `${JSON.stringify(c.req.param('uuid'))} is not a base UUID` },
          400
        )
      return usage(c, `base:${uuid}`, holder.current.classifier.windowsOfBase(uuid, now()))
    })
    app.get('/v1/usage/ip/:ip', async (c) => {
      const raw = c.req.param('ip')
      if (!ipaddr.isValid(raw))
        return c.json({ error_msg: `${JSON.stringify(raw)} is not an IP address` }, 400)
      const snap = holder.current
      const ipKey = snap.clientIp.keyOf(ipaddr.process(raw).toString())
      return usage(c, `ip:${ipKey}`, snap.classifier.windowsOfIp(ipKey))
    })
  }

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

  app.get('/v1/config', (c) => {
    const config = maskedConfig(holder.current.config) as Record<string, unknown>
    // SPEC §8: the version in force (auto shows what /server-info/ said, or null).
    return c.json({
      ...config,
      server: { ...holder.current.config.server, in_force: history.serverVersion() },
    })
  })

  app.notFound((c) => c.json({ error_msg: 'not found' }, 404))
  app.onError((err, c) => {
    const storeDown = err.name === 'StoreError'
    return c.json(
      { error_msg: storeDown ? 'the store is unavailable' : 'internal error' },
      storeDown ? 503 : 500
    )
  })
  return app
}
