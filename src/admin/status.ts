import type { Hono } from 'hono'
import type { ConfigHolder } from '../config/holder.js'
import { HISTORY } from '../history/match.js'
import { upgradeReport } from '../history/report.js'
import { compareVersions } from '../history/version.js'
import type { StatusCounts } from '../observe/status-recorder.js'
import { REFUSAL_OF } from '../observe/metrics.js'
import type { ProtectState } from '../protect/protector.js'
import type { LimiterStore, StoreKind } from '../types.js'
import type { HistoryDeps } from './history.js'
import { configView } from '../config/view.js'
import { STATUS_PAGE } from './status-page.js'
import { monthOf } from './teams.js'

// SPEC §7: GET /v1/status (JSON) and GET / (the page that draws it, refreshing every 5 s).

export interface StatusDeps {
  holder: ConfigHolder
  store: LimiterStore
  storeKind: StoreKind
  now: () => number
  version: string
  startedMs: number
  /** This process's counts, or its workers' merged. */
  counts: () => Promise<StatusCounts>
  protect: () => Promise<ProtectState | null>
  history: HistoryDeps
  workers: () => number
}

/** Outcomes that are refusals of ours, by the metrics' reasons, and two the metrics count apart. */
const REFUSALS: Record<string, string | undefined> = {
  ...REFUSAL_OF,
  gone: 'removed endpoint',
  store_unavailable: 'store unavailable',
}

/** The release after `version` in the change history, if the history knows one. */
function nextRelease(version: string | null): string | null {
  if (version === null) return null
  const later = HISTORY.releases.filter((r) => compareVersions(r.version, version) > 0)
  return later.length === 0 ? null : later[later.length - 1]!.version
}

export async function statusJson(deps: StatusDeps) {
  const { holder, now } = deps
  const snap = holder.current
  const t = now()
  const counts = await deps.counts()
  const refusals: Record<string, number> = {}
  for (const [name, values] of Object.entries(counts.series)) {
    const reason = REFUSALS[name.slice(name.indexOf('/') + 1)]
    if (reason !== undefined)
      refusals[reason] = (refusals[reason] ?? 0) + values.reduce((a, b) => a + b, 0)
  }
  const teams = []
  if (snap.config.monthly.enabled) {
    for (const team of snap.teams) {
      const m = await monthOf({ holder, store: deps.store, now }, team).catch(() => null)
      if (m !== null)
        teams.push({
          id: team.id,
          used: m.used,
          quota: m.quota,
          share: m.quota > 0 ? m.used / m.quota : 0,
        })
    }
  }
  const server = deps.history.serverVersion()
  const next = nextRelease(server)
  const report =
    next === null
      ? null
      : await upgradeReport(HISTORY, deps.history.report, server, next, t).catch(() => null)
  return {
    version: deps.version,
    uptime_s: Math.round((t - deps.startedMs) / 1000),
    processes: deps.workers(),
    store: { kind: deps.storeKind, ready: await deps.store.ready().catch(() => false) },
    server: { version: server, next, upgrade_report: report },
    traffic: { step_s: 10, end: counts.endS, series: counts.series },
    refusals,
    busiest: counts.busiest,
    teams,
    protect: await deps.protect(),
    config: configView(snap.config),
  }
}

export function statusRoutes(app: Hono, deps: StatusDeps): void {
  app.get('/v1/status', async (c) => c.json(await statusJson(deps)))
  // The page draws /v1/status in the browser; no asset comes from anywhere else.
  app.get('/', (c) =>
    c.html(STATUS_PAGE, 200, {
      'content-security-policy':
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
      'cache-control': 'no-store',
    })
  )
}
