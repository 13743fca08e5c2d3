import type { OutgoingHttpHeaders } from 'node:http'
import type { Clock } from '../clock.js'
import type { Snapshot } from './snapshot.js'
import type { HistoryDecision, Match } from '../history/match.js'
import type { SizeRefusal } from '../size/check.js'
import type { HeldBound } from '../size/body-buffer.js'
import type { Classification, Decision, Windows } from '../types.js'
import type { RateHeaderValues } from './rate-headers.js'

// What a call carries through the request path, in one place: what the rate check made of it
// (Admission), what the gate answered (a Refusal to write, or a Pass to forward), and how it
// ended (Outcome). The transports (app.ts, websocket.ts), the log line and the metrics read them.

/**
 * How one request ended, as a value: every exit of the request path names one, and one
 * finish() (observe/request-log.ts) turns it into the log line, the metrics and the summary.
 */
export type Outcome =
  | { kind: 'forwarded'; status: number; upstreamMs: number | null }
  /** The server answered 5xx (issue #41: its own outcome in the metrics, the page, the alerts). */
  | { kind: 'upstream_5xx'; status: number; upstreamMs: number | null }
  | { kind: 'upstream_error'; status: number; upstreamMs: number | null; error: string }
  | { kind: 'client_aborted'; upstreamMs: number | null }
  /**
   * basegate cut a client that took no byte of its answer for upstream.timeout_ms (nginx's
   * send_timeout): the status it had begun to get.
   */
  | { kind: 'send_timeout'; status: number; upstreamMs: number | null }
  | { kind: 'rate_limited' }
  | { kind: 'monthly_limited' }
  | ({ kind: 'size_refused' } & SizeRefusal)
  /**
   * A checked body could not be held (a held-body bound, or its temporary file failed): 503, not
   * charged. `bound`: the bound it would have passed (none: the disk failed).
   */
  | { kind: 'body_unavailable'; message: string; bound?: HeldBound }
  /** SPEC §4: a body not received whole within body_timeout_ms, or slower than min_body_rate: 408. */
  | { kind: 'body_timeout'; message: string; why: 'body_timeout' | 'min_body_rate' }
  /** SPEC §4: the client's upstream connections were all in use within queue_ms: 503, given back. */
  | { kind: 'upstream_share' }
  /** A step of basegate's threw (a bug): 500, and everything the call held freed. */
  | { kind: 'internal_error' }
  /** 400; 501 for a transfer coding basegate does not forward (RFC 9112 §6.1). */
  | { kind: 'bad_request'; reason: string; status?: 501 }
  | { kind: 'bad_path'; reason: string }
  | { kind: 'store_unavailable' }
  | { kind: 'gone'; entry: string; message: string }
  /** SPEC §9: no slot at the server came within queue_ms (or the queue was full): 503, given back. */
  | { kind: 'shed'; waitedMs: number }
  /** SPEC §9: the key already has key_in_flight calls in progress: 429, given back. */
  | { kind: 'key_in_flight' }

export type OutcomeKind = Outcome['kind']

/** What would have been refused but was forwarded (SPEC §2 dry-run, globally or per rule). */
export interface DryRun {
  /** The enforced limits are over, and `mode: dry-run` forwards the call uncharged. */
  refusal?: 'rate' | 'monthly'
  /** Dry-run rules over their limit (the call was charged to the enforced windows). */
  rules?: readonly string[]
  /** A size limit is broken, and `mode: dry-run` forwards the call. */
  size?: SizeRefusal
  /** A removed endpoint (SPEC §8) forwarded because `mode: dry-run` refuses nothing. */
  gone?: string
}

/** What the rate check made of one request. */
export interface Admission {
  classification: Classification
  clientIp: string
  /** null when no window applies (exempt, unlimited, allowed). */
  decision: Decision | null
  /** The window with the fewest calls left (what the headers and the log line show). */
  window: RateHeaderValues | null
  /** x-ratelimit-* where `headers` says, and retry-after when the call is refused for real. */
  headers: OutgoingHttpHeaders | null
  /** The enforced limits refuse this call (in dry-run mode it is forwarded all the same). */
  refused: 'rate' | 'monthly' | null
  /** Dry-run rules over their limit: logged, never refused. */
  shadowRules: readonly string[]
  /**
   * The policy that refused the call (a rule's or an override's name, `ip_ceiling`, `monthly`,
   * or the class), as RateLimit-Policy names it; null when nothing refused.
   */
  policy: string | null
  /**
   * The team's month, when a monthly quota applies; `used` is null when the decision did not
   * read it (a refusal from the over-limit cache): a log line carries the true count or none.
   */
  monthly: { team: string; used: number | null; quota: number; refused: boolean } | null
  /** How long the store call took (ms; null when none was made). */
  storeMs: number | null
  /** When it began (the clock's monotonic time: performance.now() in production), for its trace span. */
  storeStartedMs?: number
}

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
  /** SPEC §8: what the call matched in the change history. */
  history: HistoryDecision
  /** SPEC §8: ids of the entries an upgrade would break (logged as api_change, counted in metrics). */
  apiChanges: readonly string[]
}

/** A call to forward: admitted (or over a limit in dry-run). */
export interface Pass {
  kind: 'pass'
  admission: Admission
  /** The normalised path, as forwarded. */
  path: string
  /** The path classified and checked: `path` without `;` path parameters (routeOf). */
  route: string
  query: string
  snapshot: Snapshot
  /** What would have been refused, when it is forwarded anyway (SPEC §2 dry-run). */
  dryRun: DryRun | null
  /** SPEC §8: Deprecation/Link headers and the entries for the upgrade report. */
  history: HistoryDecision
  /** History entries that still depend on the body (read by the request path). */
  pendingHistory: readonly Match[]
  /** SPEC §8: ids of the entries an upgrade would break; a body's entries join later. */
  apiChanges: readonly string[]
}

export type GateResult = Refusal | Pass

export interface GateDeps {
  snapshot: () => Snapshot
  store: Windows
  /** The clock the windows count on (the store's own, for Redis, decides the buckets). */
  clock: Clock
  /** SPEC §8: the server's major.minor, or null while unknown. */
  serverVersion?: () => string | null
  /** SPEC §8: counts calls an upgrade would break (batched, never a store call per request). */
  recorder?: { record(entryId: string, key: string, nowMs: number): void }
}

/** A call the server answered: forwarded, or (5xx) the server's own failure. */
export function answeredOutcome(status: number, upstreamMs: number | null): Outcome {
  return status >= 500
    ? { kind: 'upstream_5xx', status, upstreamMs }
    : { kind: 'forwarded', status, upstreamMs }
}
