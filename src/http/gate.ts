import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { Snapshot } from '../config/snapshot.js'
import { StoreError } from '../limiter/store-error.js'
import type { LimiterStore } from '../types.js'
import { normalizePath, splitTarget } from './normalize-path.js'
import type { DryRun, Outcome } from './outcome.js'
import { admit, type Admission } from './rate-limit.js'

/** An answer of basegate's own, before anything reaches the upstream. */
export interface Refusal {
  kind: 'refuse'
  status: number
  /** `{"error_msg": ...}` text, or null for the bare 429. */
  message: string | null
  headers: OutgoingHttpHeaders | null
  outcome: Outcome
  /** The normalised path, when there is one (a bad path has none). */
  path: string | null
  admission: Admission | null
}

/** A call to forward: admitted (or over a limit in dry-run). */
export interface Pass {
  kind: 'pass'
  admission: Admission
  path: string
  query: string
  snapshot: Snapshot
  /** What would have been refused, when it is forwarded anyway (SPEC §2 dry-run). */
  dryRun: DryRun | null
}

export type GateResult = Refusal | Pass

export interface GateDeps {
  snapshot: () => Snapshot
  store: LimiterStore
  now?: () => number
}

/** How many Host headers came (headersDistinct would build an object of every header per call). */
function hostCount(raw: readonly string[]): number {
  let n = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length === 4 && name.toLowerCase() === 'host') n++
  }
  return n
}

const STORE_DOWN = 'the rate-limit store is unavailable; try again shortly'

function refuse(
  status: number,
  message: string | null,
  outcome: Outcome,
  path: string | null,
  admission: Admission | null,
  headers: OutgoingHttpHeaders | null = null
): Refusal {
  return { kind: 'refuse', status, message, headers, outcome, path, admission }
}

/**
 * The request's way in, shared by plain requests and WebSocket upgrades: normalise the path,
 * classify, count, and either refuse (as a value the transport writes) or pass. It writes
 * nothing and logs nothing.
 */
export function createGate(deps: GateDeps): (req: IncomingMessage) => Promise<GateResult> {
  const now = deps.now ?? Date.now
  return async function gate(req) {
    const snapshot = deps.snapshot()
    const { path: rawPath, query } = splitTarget(req.url ?? '/')
    const norm = normalizePath(rawPath)
    if (!norm.ok)
      return refuse(400, norm.reason, { kind: 'bad_path', reason: norm.reason }, null, null)
    const path = norm.path
    // Two Host headers name two servers: which one is meant cannot be known (issue #11).
    if (hostCount(req.rawHeaders) > 1) {
      const reason = 'the request has more than one Host header'
      return refuse(400, reason, { kind: 'bad_request', reason }, path, null)
    }
    let admission: Admission
    try {
      admission = await admit(snapshot, deps.store, req, path, now())
    } catch (err) {
      if (!(err instanceof StoreError)) throw err
      const outcome: Outcome = { kind: 'store_unavailable' }
      return refuse(503, STORE_DOWN, outcome, path, null, { 'retry-after': '1' })
    }
    const { refused, shadowRules } = admission
    let dryRun: DryRun | null = shadowRules.length > 0 ? { rules: shadowRules } : null
    if (refused !== null) {
      if (snapshot.config.mode === 'enforce') {
        const outcome: Outcome = {
          kind: refused === 'monthly' ? 'monthly_limited' : 'rate_limited',
        }
        return refuse(429, null, outcome, path, admission, admission.headers)
      }
      // SPEC §4 dry-run: forwarded, logged at warn, not charged (the store charged nothing).
      dryRun = { ...dryRun, refusal: refused }
    }
    return { kind: 'pass', admission, path, query, snapshot, dryRun }
  }
}
