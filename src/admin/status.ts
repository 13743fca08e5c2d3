import type { Clock } from '../clock.js'
import type { Hono } from 'hono'
import type { ConfigHolder } from '../config/holder.js'
import { HISTORY } from '../history/match.js'
import { upgradeReport } from '../history/report.js'
import { compareVersions } from '../history/version.js'
import type { Busy, StatusCounts } from '../observe/status-recorder.js'
import { storeUp, type StoreStateView } from './probes.js'
import type { TuningSummary } from './tuning.js'
import { HEALTHY } from '../observe/health.js'
import { hyphenated } from '../request/base-uuid.js'
import { columnOf } from '../http/outcomes.js'
import type { ProtectState } from '../protect/protector.js'
import type { Ledger, StoreKind, Windows } from '../types.js'
import type { HistoryDeps } from './history.js'
import { configView } from '../config/view.js'
import { STATUS_CSP, STATUS_HTML } from './status-page.js'
import { monthOf } from './teams.js'
import { addDays, dayBounds, daysInMonth, monthBounds } from '../quota/month.js'
import { callsOn, lastFullWeek, paceOf, readTeamRange } from '../usage/ledger-view.js'
import type { UsageStore } from '../usage/store.js'
import { storeAddress } from '../limiter/redis-client.js'

// SPEC §7: GET /v1/status (JSON) and GET / (the page that draws it, refreshing every 5 s).

export interface StatusDeps {
  holder: ConfigHolder
  store: Windows
  ledger: Ledger
  storeKind: StoreKind
  now: () => number
  /** Bounds how long the page waits on the store. */
  clock: Clock
  /** SPEC §5: each team's calls per day this month (beside its bar). */
  usage: UsageStore
  version: string
  startedMs: number
  /** This process's counts, or its workers' merged. */
  counts: () => Promise<StatusCounts>
  protect: () => Promise<ProtectState | null>
  history: HistoryDeps
  workers: () => number
  /** SPEC §7: the store's state (failing or answering, its episodes, the store's words). */
  storeState?: StoreStateView
  /** SPEC §11: each limit in force beside the keys' busiest minutes (null until worked out). */
  tuning?: () => TuningSummary | null
}

/** Outcomes the page lists as refusals, in its words (http/outcomes.ts). */
const REFUSALS: Record<string, string | undefined> = columnOf('shown')

/** The releases after `version` in the change history, oldest first. */
function laterReleases(version: string | null): string[] {
  if (version === null) return []
  return HISTORY.releases
    .filter((r) => compareVersions(r.version, version) > 0)
    .map((r) => r.version)
    .reverse()
}

type Report = Awaited<ReturnType<typeof upgradeReport>>
const callsIn = (r: Report | null) => (r === null ? 0 : r.entries.reduce((n, e) => n + e.calls, 0))

/**
 * Issue #34: the next release, and the first release that would break a call seen (a 5.1
 * server's next is 5.2, which breaks nothing seen; 5.3 breaks what still calls /dtable-server/).
 */
async function upgrades(deps: StatusDeps, server: string | null, t: number) {
  const later = laterReleases(server)
  // Read together, so the page never waits on them one after another.
  const reports = await Promise.all(
    later.map((to) => upgradeReport(HISTORY, deps.history.report, server, to, t).catch(() => null))
  )
  const next = later[0] ?? null
  const i = reports.findIndex((r) => callsIn(r) > 0)
  const breaking =
    i === -1 ? null : { version: later[i]!, calls: callsIn(reports[i]!), report: reports[i]! }
  return { next, upgrade_report: reports[0] ?? null, next_breaking: breaking }
}

/**
 * How the server is doing (issues #34, #41): failing or answering now, and since when (judged
 * call by call, observe/health.ts), the last failure that ended, and the last 5 minutes' shares.
 */
function upstreamHealth(u: StatusCounts['upstream']) {
  const recent = (xs: number[], steps = 30) => xs.slice(-steps).reduce((a, b) => a + b, 0)
  const calls = recent(u.calls)
  const errors = recent(u.errors)
  const share = calls === 0 ? 0 : errors / calls
  const h = u.health
  const state = h.state === 'failing' ? 'failing' : calls === 0 ? 'idle' : 'ok'
  return {
    state,
    since_ms: h.since_ms,
    last_outage: h.last,
    calls_5m: calls,
    errors_5m: errors,
    // Issue #49: a total outage leads with now (the last two 10-s steps), not 5 minutes' share.
    calls_20s: recent(u.calls, 2),
    errors_20s: recent(u.errors, 2),
    error_share: Math.round(share * 1000) / 1000,
    latency_ms: calls === 0 ? null : Math.round((recent(u.ms) / calls) * 10) / 10,
    last_error: u.last_error,
  }
}

/**
 * A busiest key as an operator searches for it (issue #41): a base by its hyphenated UUID, with
 * the team and the override it counts under, where it has them.
 */
function annotated(snap: ConfigHolder['current'], b: Busy) {
  const uuid = b.key.startsWith('base:') ? b.key.slice(5) : null
  const ip = b.key.startsWith('ip:') && !b.key.includes('/') ? b.key.slice(3) : null
  const team = uuid === null ? undefined : snap.teamOfBase.get(uuid)?.id
  const hit = snap.overrides.any ? snap.overrides.find(uuid, ip ?? '') : null
  const name = uuid !== null ? `base ${hyphenated(uuid)}` : `client ${b.key.slice(3)}`
  return { ...b, name, team, override: hit?.o.name }
}

/** Issue #34: the page must draw a sick store, not wait on it: what does not answer soon is left out. */
const STORE_WAIT_MS = 750
function answered<T>(clock: Clock, p: Promise<T>, otherwise: T): Promise<T> {
  return new Promise((resolve) => {
    const timer = clock.setTimer(() => resolve(otherwise), STORE_WAIT_MS)
    p.then(
      (v) => (timer.cancel(), resolve(v)),
      () => (timer.cancel(), resolve(otherwise))
    )
  })
}

/**
 * The last figures each team had while the store answered, by the admin deps they were read
 * with (issue #49: during a store outage basegate goes on refusing from them, so the page shows
 * them "as of" when they were read, not "count unknown").
 */
const lastKnown = new WeakMap<object, { asOfMs: number; teams: Map<string, TeamRow> }>()
type TeamRow = Awaited<ReturnType<typeof teamMonths>>[number]

/** The teams while the store does not answer: their last known figures, else unknown. */
function unknownMonths(deps: StatusDeps) {
  const snap = deps.holder.current
  if (!snap.config.monthly.enabled) return []
  const known = lastKnown.get(deps.holder)
  return snap.teams.map((team) => {
    const last = known?.teams.get(team.id)
    return last === undefined
      ? { id: team.id, used: null, quota: null, share: null }
      : { ...last, as_of_ms: known!.asOfMs }
  })
}

/**
 * Each team's month, read together (a team whose count does not come in time is left out):
 * its count and quota, its days so far, and the pace of its last 7 full days (SPEC §5: the
 * same figures as /v1/usage/history).
 */
async function teamMonths(deps: StatusDeps) {
  const { holder, now } = deps
  const snap = holder.current
  if (!snap.config.monthly.enabled) return []
  const tz = snap.config.monthly.timezone
  const t = now()
  const today = dayBounds(t, tz)
  const week = lastFullWeek(today.id)
  const months = await Promise.all(
    snap.teams.map((team) =>
      answered(
        deps.clock,
        (async () => {
          const m = await monthOf({ holder, store: deps.store, now }, team)
          const span = {
            from: week.from < `${today.month}-01` ? week.from : `${today.month}-01`,
            to: today.id,
            timeZone: tz,
          }
          const r = await readTeamRange(deps.ledger, team.id, span, {
            month: today.month,
            quota: m.quota,
          })
          return { m, days: r.days }
        })(),
        null
      )
    )
  )
  const endMs = monthBounds(t, tz).endMs
  return snap.teams.flatMap((team, i) => {
    const got = months[i]
    if (got == null) return []
    const { m, days } = got
    const share = m.quota > 0 ? m.used / m.quota : 0
    const pace = paceOf(callsOn(days, week.from, week.to), { ...m, endMs }, t, tz, days)
    const month = [] as { date: string; calls: number; credited: number }[]
    for (let d = `${today.month}-01`; d <= today.id; d = addDays(d, 1))
      month.push({ date: d, calls: days.get(d)?.calls ?? 0, credited: days.get(d)?.credited ?? 0 })
    return [
      {
        id: team.id,
        used: m.used,
        quota: m.quota,
        share,
        pace,
        days: month,
        days_in_month: daysInMonth(today.month),
      },
    ]
  })
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
  const server = deps.history.serverVersion()
  const none = { next: laterReleases(server)[0] ?? null, upgrade_report: null, next_breaking: null }
  // A store that does not answer: its counts are not shown as zeroes (the local fallback's),
  // and the page says they are unknown.
  const ready = await answered(deps.clock, storeUp(deps.store, deps.storeState), false)
  const shared = ready || deps.storeKind === 'memory'
  const [teams, upgrade] = shared
    ? await Promise.all([teamMonths(deps), answered(deps.clock, upgrades(deps, server, t), none)])
    : [unknownMonths(deps), { ...none, unavailable: true }]
  if (shared && deps.storeKind !== 'memory')
    lastKnown.set(deps.holder, {
      asOfMs: t,
      teams: new Map((teams as TeamRow[]).map((x) => [x.id, x])),
    })
  const upstream = upstreamHealth(counts.upstream)
  const health = deps.storeState?.view() ?? HEALTHY
  // A store frozen a moment ago has not failed FALL calls yet, but this reader's check went
  // unanswered: it is down since that check began.
  const since_ms = health.since_ms ?? (ready ? null : (deps.storeState?.unansweredSince() ?? null))
  const store = { kind: deps.storeKind, ready, ...health, since_ms }
  return {
    version: deps.version,
    uptime_s: Math.round((t - deps.startedMs) / 1000),
    processes: deps.workers(),
    alerts: alertsOf(snap.config, store, upstream),
    recoveries: recoveriesOf(t, store, upstream),
    store,
    upstream,
    server: { version: server, ...upgrade },
    traffic: { step_s: 10, end: counts.endS, series: counts.series },
    refusals,
    busiest: counts.busiest.map((b) => annotated(snap, b)),
    teams,
    protect: await deps.protect(),
    tuning: deps.tuning?.() ?? null,
    config: configView(snap.config),
  }
}

/** A problem the page's header flags in red: what, and since when (epoch ms). */
interface Alert {
  kind: 'store' | 'server'
  text: string
  since_ms: number | null
}

/** What the page's header flags in red (issues #34, #41): a store or a server in trouble. */
function alertsOf(
  config: ConfigHolder['current']['config'],
  store: { kind: StoreKind; ready: boolean; since_ms: number | null; error: string | null },
  upstream: ReturnType<typeof upstreamHealth>
): Alert[] {
  const out: Alert[] = []
  if (store.kind !== 'memory' && !store.ready) {
    const effect =
      config.store.onError === 'open'
        ? 'on_error: open, so each instance limits alone and team months catch up when it answers'
        : 'on_error: closed, so calls get 503'
    // SPEC §4: with the store's own words (`OOM command not allowed …` refuses writes).
    const words = store.error === null ? 'does not answer' : `fails: ${store.error}`
    out.push({
      kind: 'store',
      text: `the store (${storeAddress(config.store)}) ${words}; ${effect}`,
      since_ms: store.since_ms,
    })
  }
  if (upstream.state === 'failing') {
    const last = upstream.last_error
    const lastText =
      last === null ? '' : `; last: ${last.status || ''} ${last.error ?? ''}`.replace(/ +/g, ' ')
    out.push({
      kind: 'server',
      text: `the server is failing (5xx, 502, 504): ${upstream.errors_20s} of ${upstream.calls_20s} calls in the last 20 s, ${upstream.errors_5m} of ${upstream.calls_5m} in the last 5 minutes${lastText.trimEnd()}`,
      since_ms: upstream.since_ms,
    })
  }
  return out
}

/** A problem that ended in the last 15 minutes: when, and how long it lasted (issue #41). */
const RECOVERY_SHOWN_MS = 15 * 60_000

function recoveriesOf(
  nowMs: number,
  store: { last: { start_ms: number; end_ms: number } | null },
  upstream: ReturnType<typeof upstreamHealth>
) {
  const out: { kind: 'store' | 'server'; start_ms: number; end_ms: number; lasted_s: number }[] = []
  const add = (kind: 'store' | 'server', l: { start_ms: number; end_ms: number } | null) => {
    if (l === null || nowMs - l.end_ms > RECOVERY_SHOWN_MS) return
    out.push({ kind, ...l, lasted_s: Math.round((l.end_ms - l.start_ms) / 1000) })
  }
  add('store', store.last)
  add('server', upstream.last_outage)
  return out
}

/** SPEC §7 (issue #39 item 5): the page's own origin only, never framed, never sniffed. */
const PAGE_HEADERS = {
  'content-security-policy': STATUS_CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
}

export function statusRoutes(app: Hono, deps: StatusDeps): void {
  app.get('/v1/status', async (c) => c.json(await statusJson(deps)))
  // The page draws /v1/status in the browser; no asset comes from anywhere else, nothing runs
  // but its own script, and no other site may frame it (clickjacking a state change).
  app.get('/', (c) => c.html(STATUS_HTML, 200, PAGE_HEADERS))
}
