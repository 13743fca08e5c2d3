import type { SizeRefusal } from '../size/check.js'

/**
 * How one request ended, as a value: every exit of the request path names one, and one
 * finish() (observe/request-log.ts) turns it into the log line, the metrics and the summary.
 */
export type Outcome =
  | { kind: 'forwarded'; status: number; upstreamMs: number | null }
  | { kind: 'upstream_error'; status: number; upstreamMs: number | null; error: string }
  | { kind: 'client_aborted'; upstreamMs: number | null }
  | { kind: 'rate_limited' }
  | { kind: 'monthly_limited' }
  | ({ kind: 'size_refused' } & SizeRefusal)
  /** A checked body could not be held (a held-body bound, or its temporary file failed): 503, not charged. */
  | { kind: 'body_unavailable'; message: string }
  /** SPEC §4: a checked body not received whole within body_timeout_ms: 408. */
  | { kind: 'body_timeout'; message: string }
  | { kind: 'bad_request'; reason: string }
  | { kind: 'bad_path'; reason: string }
  | { kind: 'store_unavailable' }
  | { kind: 'gone'; entry: string; message: string }
  /** SPEC §9: no slot at the server came within queue_ms (or the queue was full): 503, given back. */
  | { kind: 'shed'; waitedMs: number }
  /** SPEC §9: the key already has key_in_flight calls in progress: 429, given back. */
  | { kind: 'key_in_flight' }

export type OutcomeKind = Outcome['kind']

/** The status the client got (0 when it went away first). */
export function statusOf(o: Outcome): number {
  switch (o.kind) {
    case 'forwarded':
    case 'upstream_error':
    case 'size_refused':
      return o.status
    case 'client_aborted':
      return 0
    case 'rate_limited':
    case 'monthly_limited':
    case 'key_in_flight':
      return 429
    case 'bad_request':
    case 'bad_path':
      return 400
    case 'store_unavailable':
    case 'body_unavailable':
    case 'shed':
      return 503
    case 'gone':
      return 410
    case 'body_timeout':
      return 408
  }
}

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
