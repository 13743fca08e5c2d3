import { randomBytes } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { Clock } from '../clock.js'
import type { DryRun, Outcome, GateResult, Admission } from '../http/call.js'
import { columnOf, statusOf } from '../http/outcomes.js'
import type { Logger } from './log.js'
import { maskPathTokens } from '../request/path-tokens.js'
import { shownKey } from '../request/base-uuid.js'
import { peerAddress } from '../request/client-ip.js'
import { createPlainLineWriter, type PlainLine } from './request-line.js'
import type { Metrics } from './metrics.js'
import type { UsageSummary } from './summary.js'
import type { StatusRecorder, UpstreamSeen } from './status-recorder.js'
import type { Span, Tracer } from '@opentelemetry/api'
import { endWith, pastChild } from './tracing.js'

/** One request, as it ended: what finish() writes down. */
interface Finished {
  begun: Begun
  /** The normalised path (no query string); null when the path was refused. */
  path: string | null
  admission: Admission | null
  outcome: Outcome
  dryRun: DryRun | null
  /** SPEC §8: history entries the call would break on (first one logged as api_change). */
  apiChanges: readonly string[]
}

/**
 * What the transport knows of a request before the gate, and learns on its way out: the access
 * log's own fields (SPEC §7, as nginx's and Envoy's access logs carry them).
 */
export interface Begun {
  method: string
  /** The clock's monotonic time when the request arrived. */
  startedMs: number
  /** The client's `x-request-id` when it is a plain token of at most 128 characters, else a new one. */
  requestId: string
  /** At most 200 characters. */
  userAgent: string | undefined
  /** The socket's peer: the client IP of a line that has no admission (a refused path). */
  peer: string
  /** The request body's bytes, where known (a declared length, a body read whole). */
  bytesIn: number | undefined
  /** The answer's body bytes, set on the way out. */
  bytesOut: number | undefined
  /** SPEC §9: how long the call waited out a rate window's delay before its second check. */
  delayedMs: number | undefined
  /** SPEC §9: the call was given back to the windows that charged it (shed, key share, 5xx). */
  givenBack: boolean
  /** Issue #25: the request's trace span, when tracing is on. */
  span?: Span
}

const SANE_ID = /^[A-Za-z0-9._~:-]{1,128}$/

/**
 * A new request id: this process's random prefix and a counter (unique per process and across
 * processes, as nginx's $request_id is; cheaper than a random UUID per call).
 */
const ID_PREFIX = randomBytes(6).toString('hex')
let idCount = 0
function newRequestId(): string {
  return `${ID_PREFIX}-${(++idCount).toString(36)}`
}

/** The request's id: the client's when it is a plain token, else a new one (never logged raw). */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id']
  return typeof given === 'string' && SANE_ID.test(given) ? given : newRequestId()
}

/** The user agent, at most 200 characters. */
export function userAgentOf(req: IncomingMessage): string | undefined {
  const ua = req.headers['user-agent']
  return ua === undefined ? undefined : ua.length > 200 ? ua.slice(0, 200) : ua
}

/** The socket's peer, `::ffff:` unwrapped. */
export function peerOf(req: IncomingMessage): string {
  return peerAddress(req.socket.remoteAddress)
}

/** The body's declared length, where there is one. */
export function bytesInOf(req: IncomingMessage): number | undefined {
  const declared = req.headers['content-length']
  return declared === undefined ? undefined : Number(declared) || 0
}

/** The access-log record of a request as it arrives (app.ts builds its Call with these fields). */
export function begin(req: IncomingMessage, clock: Clock): Begun {
  return {
    method: req.method ?? 'GET',
    startedMs: clock.monotonic(),
    requestId: requestIdOf(req),
    userAgent: userAgentOf(req),
    peer: peerOf(req),
    bytesIn: bytesInOf(req),
    bytesOut: undefined,
    delayedMs: undefined,
    givenBack: false,
  }
}

/** The line's message of each outcome that is not quiet (http/outcomes.ts). */
const MESSAGE = columnOf('message')

const round2 = (ms: number) => Math.round(ms * 100) / 100
export const NO_CHANGES: readonly string[] = []

/** The outcome's own fields for the log line. */
function outcomeFields(o: Outcome): Record<string, unknown> {
  switch (o.kind) {
    case 'forwarded':
    case 'upstream_5xx':
      return { upstream_ms: o.upstreamMs === null ? undefined : round2(o.upstreamMs) }
    case 'upstream_error':
      return {
        upstream_ms: o.upstreamMs === null ? undefined : round2(o.upstreamMs),
        upstream_error: o.error,
      }
    case 'client_aborted':
    case 'send_timeout':
      return { upstream_ms: o.upstreamMs === null ? undefined : round2(o.upstreamMs) }
    case 'size_refused':
      return { refused: 'size', size_limit: o.limitName, count: o.count, error_msg: o.message }
    case 'bad_path':
    case 'bad_request':
      return { reason: o.reason }
    case 'gone':
      return { removed: o.entry, error_msg: o.message }
    case 'body_unavailable':
      return { error_msg: o.message, bound: o.bound }
    case 'body_timeout':
      return { error_msg: o.message, bound: o.why }
    case 'shed':
      return { waited_ms: round2(o.waitedMs) }
    default:
      return {}
  }
}

function dryRunFields(d: DryRun | null, adm: Admission | null): Record<string, unknown> {
  if (d === null) return {}
  const out: Record<string, unknown> = { dry_run: true }
  if (d.refusal) out.would_refuse = d.refusal
  if (d.rules && d.rules.length > 0) {
    out.rules = d.rules
    // Issue #41: the limit each dry-run rule would have refused at (the line's `limit` is the
    // window in force, not the rule's).
    out.rule_limits = ruleLimits(d.rules, adm)
  }
  if (d.gone) out.removed = d.gone
  if (d.size)
    Object.assign(out, {
      refused: 'size',
      size_limit: d.size.limitName,
      count: d.size.count,
      error_msg: d.size.message,
    })
  return out
}

/** A dry-run rule or override's limits by name: `{"sql": "20/60s"}`. */
function ruleLimits(names: readonly string[], adm: Admission | null): Record<string, string> {
  const out: Record<string, string> = {}
  for (const c of adm?.classification.charges ?? []) {
    if (c.kind !== 'rule' || !c.dryRun || !names.includes(c.rule)) continue
    const limit = `${c.limit}/${c.windowMs / 1000}s`
    out[c.rule] = out[c.rule] === undefined ? limit : `${out[c.rule]}, ${limit}`
  }
  return out
}

/** What the server made of a call that reached it (issue #34: the status page's health). */
function upstreamSeen(o: Outcome): UpstreamSeen | null {
  return o.kind === 'forwarded' || o.kind === 'upstream_5xx' || o.kind === 'upstream_error'
    ? o
    : null
}

/** What a request's ending is counted in. */
type CountDeps = {
  metrics?: Metrics
  summary?: UsageSummary
  status?: StatusRecorder
  clock: Clock
}

/** The request's summary entry and metrics; `httpStatus` is the answer's, as its line has it. */
function count(f: Finished, deps: CountDeps, httpStatus: number): void {
  const { metrics, summary, status } = deps
  const adm = f.admission
  const m = adm?.monthly ?? null
  const cls = adm?.classification.cls ?? 'unknown'
  const o = f.outcome
  const nowMs = deps.clock.now()
  if (adm !== null) summary?.record(adm.classification.key)
  status?.record(
    cls,
    f.dryRun !== null && o.kind === 'forwarded' ? 'dry_run' : o.kind,
    adm?.classification.key,
    nowMs,
    upstreamSeen(o)
  )
  if (m !== null && m.used !== null) summary?.recordMonthly(m.team, m.used, m.quota)
  if (metrics) {
    metrics.countRequest(cls, o.kind, f.dryRun !== null, httpStatus)
    if (o.kind === 'shed') metrics.sheds.labels(cls).inc()
    else if (o.kind === 'body_unavailable') metrics.bodyRefusals.labels(o.bound ?? 'disk').inc()
    else if (o.kind === 'body_timeout') metrics.bodyRefusals.labels(o.why).inc()
    for (const id of f.apiChanges) metrics.countApiChange(id)
    const upstreamMs = 'upstreamMs' in o ? o.upstreamMs : null
    if (upstreamMs !== null) metrics.upstreamDuration.observe(upstreamMs / 1000)
    if (m !== null && m.used !== null) {
      metrics.monthlyUsed.set({ team: m.team }, m.used)
      metrics.monthlyQuota.set({ team: m.team }, m.quota)
    }
  }
}

/** The request's span ends with what its line says (the path with its tokens masked). */
function traced(tracer: Tracer, f: Finished, status: number): void {
  const span = f.begun.span!
  const adm = f.admission
  if (adm !== null && adm.storeMs !== null && adm.storeStartedMs !== undefined)
    pastChild(tracer, span, 'rate-limit store', adm.storeStartedMs, adm.storeMs)
  endWith(span, status, {
    'url.path': f.path === null ? undefined : maskPathTokens(f.path),
    'basegate.class': adm?.classification.cls ?? 'unknown',
    'basegate.key': adm === null ? undefined : shownKey(adm.classification.key),
    'basegate.outcome': f.outcome.kind,
  })
}

/** The fields every line has, in the order pino writes them. */
function commonFields(f: Finished, status: number, nowMono: number) {
  const adm = f.admission
  const w = adm?.window ?? null
  const m = adm?.monthly ?? null
  return {
    method: f.begun.method,
    path: f.path === null ? undefined : maskPathTokens(f.path),
    class: adm?.classification.cls ?? 'unknown',
    key: adm === null ? undefined : shownKey(adm.classification.key),
    limit: w?.limit,
    remaining: w?.remaining,
    reset: w?.resetSec,
    team: m?.team,
    used: m?.used ?? undefined,
    quota: m?.quota,
    policy: adm?.policy ?? undefined,
    status,
    outcome: f.outcome.kind,
    store_ms: adm?.storeMs == null ? undefined : round2(adm.storeMs),
    store_time: adm?.decision?.storeMs,
    duration_ms: round2(nowMono - f.begun.startedMs),
    delayed_ms: f.begun.delayedMs === undefined ? undefined : round2(f.begun.delayedMs),
  }
}

/** The access-log fields after the outcome's (the plain line writes them in this order too). */
function accessFields(f: Finished) {
  const b = f.begun
  return {
    client_ip: f.admission?.clientIp ?? b.peer,
    user_agent: b.userAgent,
    request_id: b.requestId,
    bytes_in: b.bytesIn,
    bytes_out: b.bytesOut,
    given_back: b.givenBack ? true : undefined,
  }
}

/**
 * SPEC §7: one line, one count and one summary entry per request, all from the outcome.
 * Refusals, would-be refusals (dry-run), upstream failures and store outages log at warn.
 */
export function createFinisher(
  deps: CountDeps & {
    logger: Logger
    tracer?: Tracer | null
  }
) {
  const { logger } = deps
  // Issue #14: the ordinary line skips pino's object walk (same bytes; see request-line.ts).
  const plain = createPlainLineWriter(logger)
  function write(f: Finished): void {
    const o = f.outcome
    const status = statusOf(o)
    const quiet = o.kind === 'forwarded' && f.dryRun === null && status < 500 && !f.begun.givenBack
    // A 429 carries no fields of its own: a flood's lines take the prepared path too.
    const refusal = (o.kind === 'rate_limited' || o.kind === 'monthly_limited') && f.dryRun === null
    const common = commonFields(f, status, deps.clock.monotonic())
    if ((quiet || refusal) && plain !== null) {
      // The hot path: the one object, completed in place (no copy per request).
      const line = common as PlainLine
      line.upstream_ms =
        o.kind === 'forwarded' && o.upstreamMs !== null ? round2(o.upstreamMs) : undefined
      line.api_change = f.apiChanges?.[0]
      const b = f.begun
      line.client_ip = f.admission?.clientIp ?? b.peer
      line.user_agent = b.userAgent
      line.request_id = b.requestId
      line.bytes_in = b.bytesIn
      line.bytes_out = b.bytesOut
      plain(line, quiet ? 'info' : 'warn', quiet ? 'request' : MESSAGE[o.kind])
    } else {
      const line = {
        ...common,
        ...outcomeFields(o),
        ...dryRunFields(f.dryRun, f.admission),
        api_change: f.apiChanges?.[0],
        ...accessFields(f),
      }
      if (quiet) logger.info(line, 'request')
      else {
        const forwardedDryRun = f.dryRun !== null && o.kind === 'forwarded'
        logger.warn(
          line,
          forwardedDryRun ? 'over a limit (dry-run: forwarded)' : (MESSAGE[o.kind] ?? 'request')
        )
      }
    }

    count(f, deps, status)
    if (f.begun.span !== undefined && deps.tracer != null) traced(deps.tracer, f, status)
  }

  /**
   * A request's one ending, from the gate's result: its path, its admission and its history
   * (api_change) come with it, on the plain and the WebSocket path alike. A pass keeps its
   * own dry-run unless the caller knows more (a size rule broken in dry-run).
   */
  return function finish(
    g: GateResult | null,
    begun: Begun,
    outcome: Outcome,
    dryRun: DryRun | null = g?.kind === 'pass' ? g.dryRun : null,
    bodyChanges: readonly string[] = NO_CHANGES
  ): void {
    const gateChanges = g?.apiChanges ?? NO_CHANGES
    write({
      begun,
      path: g?.path ?? null,
      admission: g?.admission ?? null,
      outcome,
      dryRun,
      apiChanges: bodyChanges.length === 0 ? gateChanges : [...gateChanges, ...bodyChanges],
    })
  }
}

export type Finish = ReturnType<typeof createFinisher>
