import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { Snapshot } from './snapshot.js'
import { StoreError } from '../limiter/store-error.js'
import { HISTORY, NO_HISTORY, type HistoryDecision, type Match } from '../history/match.js'
import { checkHistory } from './history-check.js'
import { normalizePath, routeOf, splitTarget } from '../request/normalize-path.js'
import { memo1 } from '../request/memo.js'
import type { Admission, DryRun, GateDeps, GateResult, Outcome, Pass, Refusal } from './call.js'
import { admit } from './rate-limit.js'

/** How many Host headers came (headersDistinct would build an object of every header per call). */
function hostCount(raw: readonly string[]): number {
  let n = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length === 4 && name.toLowerCase() === 'host') n++
  }
  return n
}

/** `chunked` alone (any case, spaces around it); a list, or another coding, is not. */
function isChunkedOnly(te: string): boolean {
  return te.length >= 7 && te.trim().toLowerCase() === 'chunked'
}

const STORE_DOWN = 'the rate-limit store is unavailable; try again shortly'

function refuse(
  status: number,
  message: string | null,
  outcome: Outcome,
  at: {
    path: string | null
    admission?: Admission | null
    headers?: OutgoingHttpHeaders | null
    history?: HistoryDecision
  }
): Refusal {
  const { path, admission = null, headers = null, history = NO_HISTORY } = at
  const apiChanges = history.breaking.map((e) => e.id)
  return { kind: 'refuse', status, message, headers, outcome, path, admission, history, apiChanges }
}

/** SPEC §1 on_error closed: a store that cannot answer is a 503 (anything else is a bug). */
function storeDown(err: unknown, path: string): Refusal {
  if (!(err instanceof StoreError)) throw err
  const outcome: Outcome = { kind: 'store_unavailable' }
  return refuse(503, STORE_DOWN, outcome, { path, headers: { 'retry-after': '1' } })
}

export type Gate = (req: IncomingMessage) => GateResult | Promise<GateResult>

/** A raw path normalised, and its route (SPEC §6), worked out once per path while it stays. */
const pathOf = memo1(8192, (raw: string) => {
  const norm = normalizePath(raw)
  return norm.ok ? { ok: true as const, path: norm.path, route: routeOf(norm.path) } : norm
})

/**
 * The request's way in, shared by plain requests and WebSocket upgrades: normalise the path,
 * classify, count, and either refuse (as a value the transport writes) or pass. It writes
 * nothing and logs nothing. Synchronous when the store decides without I/O (issue #26).
 */
export function createGate(deps: GateDeps): Gate {
  const clock = deps.clock
  return function gate(req) {
    const snapshot = deps.snapshot()
    const { path: rawPath, query } = splitTarget(req.url ?? '/')
    const norm = pathOf(rawPath)
    if (!norm.ok)
      return refuse(400, norm.reason, { kind: 'bad_path', reason: norm.reason }, { path: null })
    const path = norm.path
    const route = norm.route
    if (route === null) {
      const reason = 'the path climbs above the root (through a ;parameter)'
      return refuse(400, reason, { kind: 'bad_path', reason }, { path })
    }
    // Two Host headers name two servers: which one is meant cannot be known (issue #11).
    if (hostCount(req.rawHeaders) > 1) {
      const reason = 'the request has more than one Host header'
      return refuse(400, reason, { kind: 'bad_request', reason }, { path })
    }
    // RFC 9112 §6.1: a transfer coding other than chunked is not understood here (a server and
    // basegate reading `gzip, chunked` differently is a smuggling path): 501, nothing forwarded.
    const te = req.headers['transfer-encoding']
    if (te !== undefined && !isChunkedOnly(te)) {
      const reason = `Transfer-Encoding "${te.slice(0, 64)}" is not supported (only chunked)`
      const outcome: Outcome = { kind: 'bad_request', reason, status: 501 }
      return refuse(501, reason, outcome, { path, headers: { connection: 'close' } })
    }
    let admitted: Admission | Promise<Admission>
    try {
      admitted = admit(snapshot, deps.store, req, route, clock)
    } catch (err) {
      return storeDown(err, path)
    }
    const method = req.method ?? 'GET'
    // A flood's refusals take nothing more than their own answer (nothing else is built).
    if (!(admitted instanceof Promise))
      return (
        rateRefusal(snapshot, path, admitted) ??
        windowsSaid(deps, { method, path, route, query, snapshot }, admitted)
      )
    const at = { method, path, route, query, snapshot }
    return admitted.then(
      (a) => rateRefusal(snapshot, path, a) ?? windowsSaid(deps, at, a),
      (err: unknown) => storeDown(err, path)
    )
  }
}

/** The 429 of a call the enforced windows refuse; null when they admit it (or dry-run forwards it). */
function rateRefusal(snapshot: Snapshot, path: string, admission: Admission): Refusal | null {
  const { refused } = admission
  if (refused === null || snapshot.config.mode !== 'enforce') return null
  const outcome: Outcome = { kind: refused === 'monthly' ? 'monthly_limited' : 'rate_limited' }
  return refuse(429, null, outcome, { path, admission, headers: admission.headers })
}

/** Windows that admitted the call (or, in dry-run, would have refused it): on to the change history. */
function windowsSaid(
  deps: GateDeps,
  call: { method: string; path: string; route: string; query: string; snapshot: Snapshot },
  admission: Admission
): GateResult {
  const { refused, shadowRules } = admission
  let dryRun: DryRun | null = shadowRules.length > 0 ? { rules: shadowRules } : null
  // SPEC §4 dry-run: a refusal here is forwarded, logged at warn, not charged (the store
  // charged nothing); under enforce, rateRefusal answered it before.
  if (refused !== null) dryRun = { ...dryRun, refusal: refused }
  return historyStep(deps, call, admission, dryRun)
}

/**
 * SPEC §8 on an admitted call: a removed endpoint is answered 410 (enforce), the entries
 * that break later are recorded, and those that still depend on the body are left pending.
 */
function historyStep(
  deps: GateDeps,
  at: { method: string; path: string; route: string; query: string; snapshot: Snapshot },
  admission: Admission,
  dryRun: DryRun | null
): GateResult {
  const { method, path, route, query, snapshot } = at
  const matches = HISTORY.match(method, route, query)
  if (matches.length === 0) return passOf(at, admission, dryRun, NO_HISTORY, [])
  const known = matches.filter((m) => m.bodyWithout === null).map((m) => m.entry)
  const key = admission.classification.key
  const history = checkHistory(deps, snapshot, { method, path: route, key }, known)
  if (history.gone !== null) {
    // SPEC §8: not forwarded, and counted like any call of its class (it was admitted).
    const { entry, message } = history.gone
    const outcome: Outcome = { kind: 'gone', entry: entry.id, message }
    if (snapshot.config.mode === 'enforce') {
      const headers = admission.headers
      return refuse(410, message, outcome, { path, admission, headers, history })
    }
    dryRun = { ...dryRun, gone: entry.id }
  }
  return passOf(
    at,
    admission,
    dryRun,
    history,
    matches.filter((m) => m.bodyWithout !== null)
  )
}

/** A call to forward, with what the history made of it. */
function passOf(
  at: { path: string; route: string; query: string; snapshot: Snapshot },
  admission: Admission,
  dryRun: DryRun | null,
  history: HistoryDecision,
  pendingHistory: readonly Match[]
): Pass {
  const { path, route, query, snapshot } = at
  const apiChanges = history.breaking.length === 0 ? [] : history.breaking.map((e) => e.id)
  return {
    kind: 'pass',
    admission,
    path,
    route,
    query,
    snapshot,
    dryRun,
    history,
    pendingHistory,
    apiChanges,
  }
}
