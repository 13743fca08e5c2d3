import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Tracer } from '@opentelemetry/api'
import { systemClock, type Clock } from './clock.js'
import type { DryRun, GateResult, Outcome, Pass, Refusal } from './http/call.js'
import { sendContinue } from './http/continue.js'
import { createGate, type Gate } from './http/gate.js'
import { bodyHistory, pendingFields } from './http/history-check.js'
import type { ForwardResult, Forwarder } from './http/proxy.js'
import { sendJsonError, sendRefusal } from './http/respond.js'
import type { Snapshot } from './http/snapshot.js'
import type { Logger } from './observe/log.js'
import type { Metrics } from './observe/metrics.js'
import {
  bytesInOf,
  createFinisher,
  peerOf,
  requestIdOf,
  userAgentOf,
  type Begun,
  type Finish,
} from './observe/request-log.js'
import type { StatusRecorder } from './observe/status-recorder.js'
import type { MonthlyNotices } from './usage/notices.js'
import type { UsageRecorder } from './usage/recorder.js'
import type { UsageSummary } from './observe/summary.js'
import { endWith, requestSpan, upstreamSpan } from './observe/tracing.js'
import { CallGuard, KEY_BUSY_MESSAGE, SHED_MESSAGE, type SlotAnswer } from './protect/call-guard.js'
import { createDelayer, delayMsOf } from './protect/delay.js'
import { Protector } from './protect/protector.js'
import { BufferBudget } from './size/body-buffer.js'
import { sizeCheckFor } from './size/actions.js'
import { sizedBody, sizedQuery, STREAMED, type SizeDeps, type SizedBody } from './size/body.js'
import type { LimiterStore } from './types.js'
import { createUpgradeHandler } from './websocket.js'

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
  /** SPEC §5: calls per day of each base and team (batched to the store). */
  usage?: UsageRecorder
  /** SPEC §5: the 80 % and 100 % lines of a team's month. */
  notices?: MonthlyNotices
  /** Issue #25: OpenTelemetry, when an OTLP endpoint is configured. */
  tracer?: Tracer | null
  /** Every time read and timer set on the request path (the system's by default). */
  clock?: Clock
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

/**
 * One request on its way through: made once as it arrives, filled in by each step of its
 * story, read by the one finish() at its end (the log line, the metrics, the span).
 */
interface Call extends Begun {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  /** What the gate made of it: set by the gate step, a Pass from the key step on. */
  gate: GateResult | null
  /** What a dry-run forwards anyway (a rule, a limit, a size). */
  dryRun: DryRun | null
  /** The body to forward (undefined: the request streams through), and how to free it. */
  body: Extract<SizedBody, { kind: 'forward' }> | null
  /** Its place at the server (SPEC §9). */
  slot: SlotAnswer | null
}

/** What the steps share: the gateway's parts, made once. */
interface Flow {
  deps: GatewayDeps & { clock: Clock }
  clock: Clock
  gate: Gate
  finish: Finish
  sizeDeps: SizeDeps
  guard: CallGuard
  /** SPEC §9 delay_ms: waits out a refusal's windows and asks the gate again. */
  delayed: ReturnType<typeof createDelayer>
}

/** A step says whether the call goes on (true) or ended, answered and finished (false). */
type Next = boolean | Promise<boolean>
type Step = (call: Call, flow: Flow) => Next

/** The call's story, top to bottom (each step below, in this order). */
const STORY: readonly Step[] = [
  gateStep, //     normalise, classify, count (and wait out delay_ms): 400, 429, 410, 503
  keyShareStep, // SPEC §9 key_in_flight: 429, given back
  bodyStep, //     SPEC §4 the checked body held whole, SPEC §8 a body's history: 400-415, 503
  slotStep, //     SPEC §9 a slot at the server, the web UI first: 503 after queue_ms
  forwardStep, //  to the server; its answer streams back; finish
]

/** Runs the story from `from`: synchronous until a step waits (a refusal takes no promise). */
function tell(call: Call, flow: Flow, from: number): void | Promise<void> {
  for (let i = from; i < STORY.length; i++) {
    const next = STORY[i]!(call, flow)
    if (next === false) return
    if (next !== true) return next.then((go) => (go ? tell(call, flow, i + 1) : undefined))
  }
}

/** The call ends here: one finish() for every exit. Returns false (the story stops). */
function ended(call: Call, flow: Flow, outcome: Outcome): false {
  flow.finish(call.gate!, call, outcome, call.dryRun)
  return false
}

function gateStep(call: Call, flow: Flow): Next {
  // A decision made without I/O takes no closure.
  const g = flow.gate(call.req)
  return g instanceof Promise ? g.then((r) => judged(call, flow, r)) : judged(call, flow, g)
}

/** A pass goes on; a refusal is answered, unless SPEC §9 delay_ms lets it wait and ask again. */
function judged(call: Call, flow: Flow, g: GateResult): Next {
  call.gate = g
  if (g.kind === 'pass') {
    call.dryRun = g.dryRun
    return true
  }
  // Asked synchronously: the flood's refusals that cannot wait pay nothing for delay_ms.
  const waitMs = delayMsOf(g, flow.deps.snapshot().config.rateLimits.delayMs)
  if (waitMs === null) return refused(call, flow, g)
  const onWaited = (ms: number) => (call.delayedMs = ms)
  return flow.delayed(call.req, call.res, g, waitMs, onWaited).then((again) => {
    if (again === null) return ended(call, flow, { kind: 'client_aborted', upstreamMs: null })
    if (again.kind === 'refuse') return refused(call, flow, again)
    return judged(call, flow, again)
  })
}

function refused(call: Call, flow: Flow, g: Refusal): false {
  call.gate = g
  call.bytesOut = sendRefusal(call.res, g, call.requestId)
  return ended(call, flow, g.outcome)
}

/** SPEC §9: one key's share of the server, held until the call is done. */
function keyShareStep(call: Call, flow: Flow): Next {
  const { admission } = call.gate as Pass
  const busy = flow.guard.enterKey(admission)
  if (busy === null) return true
  return busy.then(({ headers, givenBack }) => {
    call.givenBack = givenBack
    call.bytesOut = sendJsonError(call.res, 429, KEY_BUSY_MESSAGE, headers, call.requestId)
    return ended(call, flow, { kind: 'key_in_flight' })
  })
}

/** SPEC §4 and §8: the body the checks and the history need, read by size/ (or streamed). */
function bodyStep(call: Call, flow: Flow): Next {
  const pass = call.gate as Pass
  const { req, res } = call
  const check = sizeCheckFor(call.method, pass.route)
  // Most calls read no body: they take nothing here (no per-call object, no closure); a List
  // Rows call has its query checked, still without one.
  if (pass.pendingHistory.length === 0) {
    if (check === null) return ((call.body = STREAMED), true)
    if (check.counts === 'query')
      return bodyDone(call, flow, pass, sizedQuery(pass.snapshot.config, pass.query))
  }
  const sized = sizedBody(flow.sizeDeps, req, pass.snapshot.config, check, {
    path: pass.route,
    query: pass.query,
    client: pass.snapshot.clientIp.keyOf(pass.admission.clientIp),
    sinceHeadMs: () => flow.clock.monotonic() - call.startedMs,
    onHeadPassed: () => sendContinue(req, res),
    fields: pendingFields(pass),
  })
  return sized instanceof Promise
    ? sized.then((s) => bodyDone(call, flow, pass, s))
    : bodyDone(call, flow, pass, sized)
}

/**
 * Every way out of the body step: a call that ended here leaves its key's place (the slot step
 * leaves it on every other way).
 */
function bodyDone(call: Call, flow: Flow, pass: Pass, sized: SizedBody): Next {
  const go = bodyRead(call, flow, pass, sized)
  return go instanceof Promise
    ? go.then((g) => leftIfEnded(flow, pass, g))
    : leftIfEnded(flow, pass, go)
}

function leftIfEnded(flow: Flow, pass: Pass, go: boolean): boolean {
  if (!go) flow.guard.leaveKey(pass.admission)
  return go
}

/** What the body step said: the body to forward, or an answer of ours. */
function bodyRead(call: Call, flow: Flow, pass: Pass, sized: SizedBody): Next {
  const { req, res } = call
  const { admission } = pass
  const id = call.requestId
  switch (sized.kind) {
    case 'aborted':
      return ended(call, flow, { kind: 'client_aborted', upstreamMs: null })
    case 'unavailable':
      // SPEC §4: a body that could not be held is not forwarded and not charged.
      return flow.guard.giveBackNow(admission).then((givenBack) => {
        call.givenBack = givenBack
        const headers = { ...admission.headers, 'retry-after': '1', connection: 'close' }
        call.bytesOut = sendJsonError(res, 503, sized.message, headers, id)
        return ended(call, flow, { kind: 'body_unavailable', message: sized.message })
      })
    case 'timeout': {
      // SPEC §4 body_timeout_ms: the connection closes; its held bytes were freed already.
      res.once('finish', () => req.socket.destroy())
      const headers = { ...admission.headers, connection: 'close' }
      call.bytesOut = sendJsonError(res, 408, sized.message, headers, id)
      return ended(call, flow, { kind: 'body_timeout', message: sized.message })
    }
    case 'refused': {
      sized.release()
      // SPEC §4: nothing of the call reached the server. A body left unread closes the connection.
      res.setHeader('connection', 'close')
      const r = sized.refusal
      call.bytesOut = sendJsonError(res, r.status, r.message, admission.headers, id)
      return ended(call, flow, { kind: 'size_refused', ...r })
    }
    case 'forward':
      if (sized.broken !== null) call.dryRun = { ...call.dryRun, size: sized.broken }
      if (sized.fields !== undefined) bodyHistory(flow.deps, pass, call.method, sized.fields)
      call.body = sized
      return true
  }
}

/** SPEC §9: a slot at the server (the web UI's calls first; none within queue_ms: 503). */
function slotStep(call: Call, flow: Flow): Next {
  const pass = call.gate as Pass
  // Synchronous when a slot is free (always, without `protect`): no promise, no closure.
  const slot = flow.guard.slot(pass.admission, call.res)
  return slot instanceof Promise
    ? slot.then((s) => slotted(call, flow, s))
    : slotted(call, flow, slot)
}

/** A slot, or the 503 of a call that got none (given back). */
function slotted(call: Call, flow: Flow, slot: SlotAnswer): boolean {
  const pass = call.gate as Pass
  call.slot = slot
  if (slot.result === 'granted') return true
  call.body!.release()
  call.givenBack = slot.givenBack === true
  if (slot.result === 'cancelled')
    return ended(call, flow, { kind: 'client_aborted', upstreamMs: null })
  const headers = flow.guard.shedHeaders(pass.admission, pass.snapshot.config)
  call.bytesOut = sendJsonError(call.res, 503, SHED_MESSAGE, headers, call.requestId)
  return ended(call, flow, { kind: 'shed', waitedMs: slot.waitedMs })
}

/** To the server; the call ends when its answer did (forwarder's done). */
function forwardStep(call: Call, flow: Flow): false {
  const pass = call.gate as Pass
  const { req, res } = call
  const { admission, snapshot, history } = pass
  const tracer = flow.deps.tracer
  const up = tracer != null && call.span !== undefined ? upstreamSpan(tracer, call.span) : null
  sendContinue(req, res)
  flow.deps.forwarder.forward({
    req,
    res,
    pathAndQuery: pass.path + pass.query,
    extraHeaders:
      history.headers === null ? admission.headers : { ...admission.headers, ...history.headers },
    body: call.body!.body,
    timeoutMs: snapshot.config.upstream.timeoutMs,
    requestId: call.requestId,
    traceparent: up?.traceparent,
    done: (r) => {
      if (up !== null) endWith(up.span, r.status, {})
      call.body!.release()
      call.bytesOut = r.bytesOut
      call.givenBack = flow.guard.finished(admission, call.slot!.ticket, snapshot.config, r)
      ended(call, flow, forwardOutcome(r))
    },
  })
  return false
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
function sizeDepsOf(deps: GatewayDeps, clock: Clock): SizeDeps {
  const metrics = deps.metrics
  const budget = new BufferBudget()
  // SPEC §4: the bytes held now, in memory and on disk, read at each scrape.
  metrics?.watchHeldBodies(() => ({ memory: budget.heldInMemory, disk: budget.heldOnDisk }))
  return {
    budget,
    processes: deps.processes ?? 1,
    tmpDir: deps.tmpDir,
    onSpilled: () => metrics?.bodySpills.inc(),
    setTimer: (fn, ms) => {
      const t = clock.setTimer(fn, ms)
      return () => t.cancel()
    },
  }
}

/** Nothing a request does may crash the process; the client gets a 500 or a closed socket. */
function requestFailed(logger: Logger, res: ServerResponse, err: unknown): void {
  logger.error({ err }, 'request failed')
  if (!res.headersSent) sendJsonError(res, 500, 'internal error')
  else res.destroy()
}

/** The gateway: its parts made once, and each request's Call told its story. */
export function createGateway(deps: GatewayDeps): Gateway {
  const { logger } = deps
  const clock = deps.clock ?? systemClock
  const gateDeps = { ...deps, clock }
  const gate = createGate(gateDeps)
  const finish = createFinisher({ ...deps, clock })
  const protector = new Protector(() => deps.snapshot().config.protect, deps.processes ?? 1, clock)
  deps.metrics?.watchProtect(() => protector.state())
  const guard = new CallGuard({
    protector,
    store: deps.store,
    clock,
    onGiveBackError: (err) => logger.warn({ err }, 'a call could not be given back'),
  })
  const delayed = createDelayer({
    gate,
    protector,
    clock,
    onDelayed: (result) => deps.metrics?.delayed.labels(result).inc(),
  })
  const sizeDeps = sizeDepsOf(deps, clock)
  const flow: Flow = { deps: gateDeps, clock, gate, finish, sizeDeps, guard, delayed }

  function handleRequest(req: IncomingMessage, res: ServerResponse): void {
    try {
      // The access log's own fields (SPEC §7) and the story's, in one object per request.
      const call: Call = {
        method: req.method ?? 'GET',
        startedMs: clock.monotonic(),
        requestId: requestIdOf(req),
        userAgent: userAgentOf(req),
        peer: peerOf(req),
        bytesIn: bytesInOf(req),
        bytesOut: undefined,
        delayedMs: undefined,
        givenBack: false,
        span: deps.tracer != null ? requestSpan(deps.tracer, req) : undefined,
        req,
        res,
        gate: null,
        dryRun: null,
        body: null,
        slot: null,
      }
      const told = tell(call, flow, 0)
      if (told instanceof Promise) told.catch((err: unknown) => requestFailed(logger, res, err))
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
    clock,
  })
  return { handleRequest, handleUpgrade: upgrade.handle, tunnels: upgrade.tunnels, protector }
}
