import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Snapshot } from './http/snapshot.js'
import { bodyHistory } from './http/history-check.js'
import { createGate } from './http/gate.js'
import type { DryRun, Outcome, GateResult, Pass, Refusal } from './http/call.js'
import type { ForwardRequest, ForwardResult, Forwarder } from './http/proxy.js'
import { sendJsonError, sendRefusal } from './http/respond.js'
import { createUpgradeHandler } from './websocket.js'
import type { Logger } from './observe/log.js'
import type { Metrics } from './observe/metrics.js'
import { begin, createFinisher, type Begun, type Finish } from './observe/request-log.js'
import type { UsageSummary } from './observe/summary.js'
import type { StatusRecorder } from './observe/status-recorder.js'
import type { Tracer } from '@opentelemetry/api'
import { endWith, requestSpan, upstreamSpan } from './observe/tracing.js'
import { sendContinue } from './http/continue.js'
import { BufferBudget } from './size/body-buffer.js'
import { sizedBody, type SizeDeps } from './size/body.js'
import type { LimiterStore } from './types.js'
import { CallGuard, KEY_BUSY_MESSAGE, SHED_MESSAGE, type SlotAnswer } from './protect/call-guard.js'
import { createDelayer, delayMsOf } from './protect/delay.js'
import { Protector } from './protect/protector.js'

export interface GatewayDeps {
  /** The current configuration snapshot; read once per request. */
  snapshot: () => Snapshot
  store: LimiterStore
  forwarder: Forwarder
  logger: Logger
  /** The upstream's URL, for WebSocket upgrades (which bypass the pool). */
  upstreamUrl: string
  metrics?: Metrics
  summary?: UsageSummary
  /** SPEC §7: the status page's counts. */
  status?: StatusRecorder
  /** Issue #25: OpenTelemetry, when an OTLP endpoint is configured. */
  tracer?: Tracer | null
  now?: () => number
  /** SPEC §8: the server's version, or null while unknown. */
  serverVersion?: () => string | null
  /** SPEC §8: the upgrade report's counter (batched). */
  recorder?: { record(entryId: string, key: string, nowMs: number): void }
  /** SPEC §4: how many processes share size_limits.buffer_bytes (workers); 1 by default. */
  processes?: number
  /** Where spilled bodies go; the OS's temporary directory by default. */
  tmpDir?: string
}

export interface Gateway {
  handleRequest(req: IncomingMessage, res: ServerResponse): void
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void
  /** Open WebSocket tunnels, for graceful shutdown. */
  readonly tunnels: ReadonlySet<Duplex>
  /** SPEC §9: this process's in-flight ceiling, queues and key shares. */
  readonly protector: Protector
}

/** What the request path's steps share. */
interface Flow {
  deps: GatewayDeps
  finish: Finish
  sizeDeps: SizeDeps
  guard: CallGuard
  /** SPEC §9 delay_ms: waits out a refusal's windows and asks the gate again. */
  delayed: ReturnType<typeof createDelayer>
}

/** A call whose body is ready to forward. */
interface Ready {
  body: ForwardRequest['body']
  /** Frees the held body (memory budget, temp file). */
  release: () => void
  dryRun: DryRun | null
}

/** The outcome of a forwarded call, from what the forwarder saw. */
export function forwardOutcome(r: ForwardResult): Outcome {
  if (r.status === 0) return { kind: 'client_aborted', upstreamMs: r.upstreamMs }
  if (r.error !== undefined) {
    return { kind: 'upstream_error', status: r.status, upstreamMs: r.upstreamMs, error: r.error }
  }
  return { kind: 'forwarded', status: r.status, upstreamMs: r.upstreamMs }
}

/** The size room's needs: this process's body budget, and the metrics it feeds. */
function sizeDepsOf(deps: GatewayDeps): SizeDeps {
  const metrics = deps.metrics
  const budget = new BufferBudget()
  // SPEC §4: the bytes held now, in memory and on disk, read at each scrape.
  metrics?.watchHeldBodies(() => ({ memory: budget.heldInMemory, disk: budget.heldOnDisk }))
  return {
    budget,
    processes: deps.processes ?? 1,
    tmpDir: deps.tmpDir,
    onSpilled: () => metrics?.bodySpills.inc(),
  }
}

/**
 * SPEC §4: the checked body, held whole (or the history's body read). Null when the call
 * ended here (refused, or the client went away), its line written.
 */
function readBody(
  flow: Flow,
  req: IncomingMessage,
  res: ServerResponse,
  pass: Pass,
  begun: Begun
): Ready | null | Promise<Ready | null> {
  // Synchronous when the body step is (an unchecked call): no promise per request.
  const maybe = sizedBody(flow.sizeDeps, req, pass.snapshot.config, {
    path: pass.route,
    query: pass.query,
    client: pass.snapshot.clientIp.keyOf(pass.admission.clientIp),
    sinceHeadMs: () => performance.now() - begun.startedMs,
    onHeadPassed: () => sendContinue(req, res),
  })
  if (maybe instanceof Promise)
    return maybe.then((sized) => afterSized(flow, req, res, pass, begun, sized))
  return afterSized(flow, req, res, pass, begun, maybe)
}

/** What the body step said: a refusal answered here (null), or the body to forward. */
function afterSized(
  flow: Flow,
  req: IncomingMessage,
  res: ServerResponse,
  pass: Pass,
  begun: Begun,
  sized: Awaited<ReturnType<typeof sizedBody>>
): Ready | null | Promise<Ready | null> {
  const { admission } = pass
  const id = begun.requestId
  const done = (o: Outcome, dryRun: DryRun | null = pass.dryRun) =>
    flow.finish(pass, begun, o, dryRun)
  if (sized.kind === 'aborted') return (done({ kind: 'client_aborted', upstreamMs: null }), null)
  if (sized.kind === 'unavailable') {
    // SPEC §4: a body that could not be held is not forwarded and not charged.
    return flow.guard.giveBackNow(admission).then((givenBack) => {
      begun.givenBack = givenBack
      const headers = { ...admission.headers, 'retry-after': '1', connection: 'close' }
      begun.bytesOut = sendJsonError(res, 503, sized.message, headers, id)
      done({ kind: 'body_unavailable', message: sized.message })
      return null
    })
  }
  if (sized.kind === 'timeout') {
    // SPEC §4 body_timeout_ms: the connection closes, its held bytes were freed already.
    res.once('finish', () => req.socket.destroy())
    const headers = { ...admission.headers, connection: 'close' }
    begun.bytesOut = sendJsonError(res, 408, sized.message, headers, id)
    return (done({ kind: 'body_timeout', message: sized.message }), null)
  }
  if (sized.kind === 'refused') {
    sized.release()
    const r = sized.refusal
    // SPEC §4: nothing of the call reached the server. A body left unread closes the connection.
    res.setHeader('connection', 'close')
    begun.bytesOut = sendJsonError(res, r.status, r.message, admission.headers, id)
    return (done({ kind: 'size_refused', ...r }), null)
  }
  const dryRun = sized.broken === null ? pass.dryRun : { ...pass.dryRun, size: sized.broken }
  if (pass.pendingHistory.length > 0 && sized.body === undefined) {
    sendContinue(req, res)
    return bodyHistory(flow.deps, req, pass).then((read) => {
      if (read === null) return (done({ kind: 'client_aborted', upstreamMs: null }, dryRun), null)
      return { body: read.body, release: sized.release, dryRun }
    })
  }
  return { body: sized.body, release: sized.release, dryRun }
}

/** SPEC §9: a slot at the server (the web UI's calls first; none within queue_ms → 503), then forwarded. */
function toServer(
  flow: Flow,
  req: IncomingMessage,
  res: ServerResponse,
  pass: Pass,
  begun: Begun,
  ready: Ready
): void | Promise<void> {
  // Synchronous when a slot is free (always, without `protect`): no promise per request.
  const maybe = flow.guard.slot(pass.admission, res)
  if (maybe instanceof Promise)
    return maybe.then((slot) => forwardOrShed(flow, req, res, pass, begun, ready, slot))
  forwardOrShed(flow, req, res, pass, begun, ready, maybe)
}

function forwardOrShed(
  flow: Flow,
  req: IncomingMessage,
  res: ServerResponse,
  pass: Pass,
  begun: Begun,
  ready: Ready,
  slot: SlotAnswer
): void {
  const { admission, snapshot } = pass
  const { guard } = flow
  const done = (o: Outcome) => flow.finish(pass, begun, o, ready.dryRun)
  if (slot.result !== 'granted') {
    ready.release()
    begun.givenBack = slot.givenBack === true
    if (slot.result === 'cancelled') return done({ kind: 'client_aborted', upstreamMs: null })
    const headers = guard.shedHeaders(admission, snapshot.config)
    begun.bytesOut = sendJsonError(res, 503, SHED_MESSAGE, headers, begun.requestId)
    return done({ kind: 'shed', waitedMs: slot.waitedMs })
  }
  const tracer = flow.deps.tracer
  const up = tracer != null && begun.span !== undefined ? upstreamSpan(tracer, begun.span) : null
  sendContinue(req, res)
  flow.deps.forwarder.forward({
    req,
    res,
    pathAndQuery: pass.path + pass.query,
    extraHeaders:
      pass.history.headers === null
        ? admission.headers
        : { ...admission.headers, ...pass.history.headers },
    body: ready.body,
    timeoutMs: snapshot.config.upstream.timeoutMs,
    requestId: begun.requestId,
    traceparent: up?.traceparent,
    done: (r) => {
      if (up !== null) endWith(up.span, r.status, {})
      ready.release()
      begun.bytesOut = r.bytesOut
      begun.givenBack = guard.finished(admission, slot.ticket, snapshot.config, r)
      done(forwardOutcome(r))
    },
  })
}

/** SPEC §9 delay_ms, asked synchronously: the flood's refusals that cannot wait pay nothing. */
function afterGate(
  flow: Flow,
  req: IncomingMessage,
  res: ServerResponse,
  begun: Begun,
  g: GateResult
): void | Promise<void> {
  if (g.kind === 'pass') return admitted(flow, req, res, begun, g)
  const waitMs = delayMsOf(g, flow.deps.snapshot().config.rateLimits.delayMs)
  if (waitMs === null) return refused(flow, res, begun, g)
  return flow
    .delayed(req, res, g, waitMs, (ms) => (begun.delayedMs = ms))
    .then((after) => {
      if (after === null) return flow.finish(g, begun, { kind: 'client_aborted', upstreamMs: null })
      return after.kind === 'refuse'
        ? refused(flow, res, begun, after)
        : admitted(flow, req, res, begun, after)
    })
}

function refused(flow: Flow, res: ServerResponse, begun: Begun, g: Refusal): void {
  begun.bytesOut = sendRefusal(res, g, begun.requestId)
  flow.finish(g, begun, g.outcome)
}

function admitted(
  flow: Flow,
  req: IncomingMessage,
  res: ServerResponse,
  begun: Begun,
  g: Pass
): void | Promise<void> {
  // SPEC §9: one key's share of the server, held until the call is done.
  const busy = flow.guard.enterKey(g.admission)
  if (busy !== null) {
    return busy.then(({ headers, givenBack }) => {
      begun.givenBack = givenBack
      begun.bytesOut = sendJsonError(res, 429, KEY_BUSY_MESSAGE, headers, begun.requestId)
      flow.finish(g, begun, { kind: 'key_in_flight' })
    })
  }
  const maybe = readBody(flow, req, res, g, begun)
  if (maybe instanceof Promise)
    return maybe.then((ready) => withBody(flow, req, res, begun, g, ready))
  return withBody(flow, req, res, begun, g, maybe)
}

function withBody(
  flow: Flow,
  req: IncomingMessage,
  res: ServerResponse,
  begun: Begun,
  g: Pass,
  ready: Ready | null
): void | Promise<void> {
  if (ready === null) return flow.guard.leaveKey(g.admission)
  return toServer(flow, req, res, g, begun, ready)
}

/** Nothing a request does may crash the process; the client gets a 500 or a closed socket. */
function requestFailed(logger: Logger, res: ServerResponse, err: unknown): void {
  logger.error({ err }, 'request failed')
  if (!res.headersSent) sendJsonError(res, 500, 'internal error')
  else res.destroy()
}

/** The request's way through: gate → size check → forward, and one finish() at every exit. */
export function createGateway(deps: GatewayDeps): Gateway {
  const { logger } = deps
  const gate = createGate(deps)
  const finish = createFinisher(deps)
  const sizeDeps = sizeDepsOf(deps)
  const protector = new Protector(() => deps.snapshot().config.protect, deps.processes ?? 1)
  deps.metrics?.watchProtect(() => protector.state())
  const guard = new CallGuard({
    protector,
    store: deps.store,
    onGiveBackError: (err) => logger.warn({ err }, 'a call could not be given back'),
  })
  const delayed = createDelayer({
    gate,
    protector,
    onDelayed: (result) => deps.metrics?.delayed.labels(result).inc(),
  })
  const flow: Flow = { deps, finish, sizeDeps, guard, delayed }

  /**
   * Every step is synchronous until it needs I/O (issue #26): a refusal from the over-limit
   * cache is answered and logged in this call, with no promise made.
   */
  function handleRequest(req: IncomingMessage, res: ServerResponse): void {
    try {
      const begun = begin(req)
      if (deps.tracer != null) begun.span = requestSpan(deps.tracer, req)
      const g = gate(req)
      const next =
        g instanceof Promise
          ? g.then((r) => afterGate(flow, req, res, begun, r))
          : afterGate(flow, req, res, begun, g)
      if (next instanceof Promise) next.catch((err: unknown) => requestFailed(logger, res, err))
    } catch (err) {
      requestFailed(logger, res, err)
    }
  }

  const upgrade = createUpgradeHandler({
    upstreamUrl: deps.upstreamUrl,
    logger,
    gate,
    finish,
    guard,
  })
  return { handleRequest, handleUpgrade: upgrade.handle, tunnels: upgrade.tunnels, protector }
}
