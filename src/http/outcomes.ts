import type { Outcome, OutcomeKind } from './call.js'

// Issue #48: one outcome, one row. Everything basegate says about how a call ended — the
// status the client got, the log line's message, the metrics' refusal reason, the status page's
// words and colour — is read from this table, and the compiler checks that every outcome has
// its row (`satisfies`). To add an outcome: its variant in http/call.ts's Outcome, its row here.

/** The refusal reasons of basegate_refusals_total{reason}. */
export type RefusalReason =
  'rate' | 'monthly' | 'size' | 'dry_run' | 'shed' | 'key_in_flight' | 'upstream_share' | 'body'

export interface OutcomeFacts {
  /** The status the client gets; null: the outcome's own (the server's, a size refusal's). */
  status: number | null
  /** The request line's message at warn; null: a quiet outcome (`request` at info). */
  message: string | null
  /** basegate_refusals_total's reason; null: not counted there. */
  refusal: RefusalReason | null
  /** The status page's refusal (its "Refusals and sheds" card); null: not one listed there. */
  shown: string | null
  /** The status page chart's colour: greys and blue for what went on, reds for the server's. */
  color: string
}

export const OUTCOMES = {
  forwarded: { status: null, message: null, refusal: null, shown: null, color: '#64748b' },
  upstream_5xx: {
    status: null,
    message: 'the upstream answered 5xx',
    refusal: null,
    shown: null,
    color: '#dc2626',
  },
  upstream_error: {
    status: null,
    message: 'upstream error',
    refusal: null,
    shown: null,
    color: '#7f1d1d',
  },
  client_aborted: {
    status: 0,
    message: 'client went away',
    refusal: null,
    shown: null,
    color: '#cbd5e1',
  },
  send_timeout: {
    status: null,
    message: 'cut: the client took no byte of its answer for upstream.timeout_ms',
    refusal: null,
    shown: null,
    color: '#94a3b8',
  },
  rate_limited: {
    status: 429,
    message: 'refused: over limit',
    refusal: 'rate',
    shown: 'rate',
    color: '#f59e0b',
  },
  monthly_limited: {
    status: 429,
    message: 'refused: monthly quota used up',
    refusal: 'monthly',
    shown: 'monthly',
    color: '#9333ea',
  },
  size_refused: {
    status: null,
    message: 'refused: size limit',
    refusal: 'size',
    shown: 'size',
    color: '#0d9488',
  },
  body_unavailable: {
    status: 503,
    message: 'refused: body could not be held',
    refusal: 'body',
    shown: 'body',
    color: '#0891b2',
  },
  body_timeout: {
    status: 408,
    message: 'refused: body not received in time',
    refusal: 'body',
    shown: 'body',
    color: '#06b6d4',
  },
  upstream_share: {
    status: 503,
    message: "refused: this client's upstream connections are all in use",
    refusal: 'upstream_share',
    shown: 'upstream_share',
    color: '#c2410c',
  },
  internal_error: {
    status: 500,
    message: 'request failed',
    refusal: null,
    shown: null,
    color: '#111827',
  },
  bad_request: {
    status: 400,
    message: 'refused: bad request',
    refusal: null,
    shown: null,
    color: '#a8a29e',
  },
  bad_path: {
    status: 400,
    message: 'refused: bad path',
    refusal: null,
    shown: null,
    color: '#a8a29e',
  },
  store_unavailable: {
    status: 503,
    message: 'refused: store unavailable',
    refusal: null,
    shown: 'store unavailable',
    color: '#450a0a',
  },
  gone: {
    status: 410,
    message: 'refused: removed endpoint',
    refusal: null,
    shown: 'removed endpoint',
    color: '#78350f',
  },
  shed: {
    status: 503,
    message: 'refused: the server is busy (shed)',
    refusal: 'shed',
    shown: 'shed',
    color: '#ea580c',
  },
  key_in_flight: {
    status: 429,
    message: 'refused: too many calls of this key in progress',
    refusal: 'key_in_flight',
    shown: 'key_in_flight',
    color: '#db2777',
  },
} as const satisfies Record<OutcomeKind, OutcomeFacts>

/** The status the client got (0 when it went away first): the outcome's own, else its row's. */
export function statusOf(o: Outcome): number {
  return 'status' in o && o.status !== undefined ? o.status : OUTCOMES[o.kind].status!
}

/** A column of the table, for the outcomes that have a value in it. */
export function columnOf<C extends keyof OutcomeFacts>(
  column: C
): Partial<Record<OutcomeKind, NonNullable<OutcomeFacts[C]>>> {
  const out: Partial<Record<OutcomeKind, NonNullable<OutcomeFacts[C]>>> = {}
  for (const [kind, facts] of Object.entries(OUTCOMES) as [OutcomeKind, OutcomeFacts][]) {
    const v = facts[column]
    if (v !== null) out[kind] = v as NonNullable<OutcomeFacts[C]>
  }
  return out
}
