import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Tracer } from '@opentelemetry/api'
import type { Clock } from './clock.js'
import { answeredOutcome, type Outcome, type Refusal } from './http/call.js'
import { sendContinue } from './http/continue.js'
import { createGate } from './http/gate.js'
import {
  SEND_TIMEOUT,
  type ForwardRequest,
  type ForwardResult,
  type Forwarder,
} from './http/proxy.js'
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
  NO_CHANGES,
} from './observe/request-log.js'
import type { StatusRecorder } from './observe/status-recorder.js'
import type { UsageSummary } from './observe/summary.js'
import { endWith, requestSpan, upstreamSpan } from './observe/tracing.js'
import { CallGuard } from './protect/call-guard.js'
import { createDelayer } from './protect/delay.js'
import { Protector } from './protect/protector.js'
import { UpstreamShares } from './protect/upstream-shares.js'
import { BufferBudget } from './size/body-buffer.js'
import { TOO_SLOW } from './size/body-pace.js'
import type { SizeDeps } from './size/body.js'
import { tooSlowMessage } from './size/check.js'
import {
  on,
  type Bodied,
  type Ending,
  type ForwardBody,
  type Held,
  type Next,
  type Passed,
  type Reply,
  type Slotted,
} from './spine/call.js'
import type { Span } from '@opentelemetry/api'
import type { DryRun, GateResult, Pass } from './http/call.js'
import type { BodyPace } from './size/body-pace.js'
import { tmpdir } from 'node:os'
import { AnswerSpool } from './http/answer-spool.js'
import { heldLimitsOf } from './size/body.js'
import {
  bodyStep,
  gateStep,
  release,
  keyShareStep,
  poolStep,
  slotStep,
  tell,
  type Flow,
  type HttpArrived,
} from './spine/steps.js'
import type { Windows } from './types.js'
import type { MonthlyNotices } from './usage/notices.js'
import type { UsageRecorder } from './usage/recorder.js'
import type { LedgerRecorder } from './usage/ledger-recorder.js'
import { createAccounting } from './spine/accounting.js'
import type { ShapeRecorder } from './tuning/recorder.js'
import { createUpgradeHandler } from './websocket.js'
import { Keeper } from './usage/keep.js'

export interface GatewayDeps {
  /** The current configuration snapshot; read once per request. */
  snapshot: () => Snapshot
  store: Windows
  forwarder: Forwarder
  logger: Logger
  /** The upstream's URL, for WebSocket upgrades (which bypass the pool). */
  upstreamUrl: string
  metrics?: Metrics
  summary?: UsageSummary
  /** SPEC §7: the status page's counts. */
  status?: StatusRecorder
  /** SPEC §5: calls per day of each base (batched to the store). */
  usage?: UsageRecorder
  /** SPEC §5: team calls no rate-limit script put in the ledger (written late, batched). */
  ledger?: LedgerRecorder
  /** SPEC §5: the 80 % and 100 % lines of a team's month. */
  notices?: MonthlyNotices
  /** SPEC §11: how keys' calls fall in time (batched to the store). */
  shapes?: ShapeRecorder
  /** Issue #25: OpenTelemetry, when an OTLP endpoint is configured. */
  tracer?: Tracer | null
  /** Every time read and timer set on the request path (the system's by default). */
  clock: Clock
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
  /** SPEC §4: each client's share of this process's upstream pool. */
  readonly shares: UpstreamShares
}

/**
 * A plain request's story, top to bottom (the steps are spine/steps.ts'); every exit, a thrown
 * step included, goes through spine's one end(): what the call holds is freed, its line written.
 * Each step's continuation is a function of the module (the record carries its flow), so a call
 * makes no closure per step (SPEC §12); a step that waits makes the one its promise needs.
 *
 *   gate       normalise, classify, count (and wait out delay_ms): 400, 429, 410, 503
 *   key share  SPEC §9 key_in_flight: 429, given back
 *   body       SPEC §4 held whole (checked, or small) or paced; §8 its history: 400-415, 503, 408
 *   pool       SPEC §4 the client's share of the upstream pool: 503 after queue_ms, given back
 *   slot       SPEC §9 a slot at the server, the web UI first: 503 after queue_ms, given back
 *   forward    to the server; its answer streams back: the upstream's, or 502, 504, 408
 */
function story(call: HttpCall): Next<Outcome> {
  return on(gateStep(call, call.flow), afterGate)
}
const afterGate = (c: HttpCall & Passed): Ending => on(keyShareStep(c, c.flow), afterKeyShare)
const afterKeyShare = (c: HttpCall & Passed): Ending => on(bodyStep(c, c.flow), afterBody)
const afterBody = (c: HttpCall & Bodied): Ending => on(poolStep(c, c.flow), afterPool)
const afterPool = (c: HttpCall & Bodied): Ending => on(slotStep(c, c.flow), forwardStep)

/** To the server; the call ends when its answer did (the forwarder's done). */
function forwardStep(call: HttpCall & Bodied & Slotted): Promise<Outcome> {
  const { gate, flow } = call
  const { admission, snapshot, history } = gate
  const tracer = flow.tracer
  const up = tracer != null && call.span !== undefined ? upstreamSpan(tracer, call.span) : null
  sendContinue(call.req, call.res)
  call.pathAndQuery = gate.path + gate.query
  call.extraHeaders =
    history.headers === null ? admission.headers : { ...admission.headers, ...history.headers }
  call.timeoutMs = snapshot.config.upstream.timeoutMs
  call.minBodyRate = snapshot.config.sizeLimits.minBodyRate
  call.traceparent = up?.traceparent
  call.upSpan = up?.span
  return new Promise((resolve) => {
    call.answered = resolve
    flow.forwarder.forward(call)
  })
}

/**
 * A plain request's record (SPEC §12: one shape for every call, every field from its birth, so
 * the steps' property reads stay monomorphic), and the forwarder's request: what the forward
 * needs it reads here, and what it reports comes back through the methods (no object or
 * closure made per call for it).
 */
class HttpCall implements HttpArrived, ForwardRequest {
  readonly method: string
  readonly startedMs: number
  readonly requestId: string
  readonly userAgent: string | undefined
  readonly peer: string
  readonly bytesIn: number | undefined
  bytesOut: number | undefined = undefined
  delayedMs: number | undefined = undefined
  givenBack = false
  span: Span | undefined
  readonly reply: ResponseReply
  readonly held: Held = { key: null, body: null, share: null, ticket: null, tunnel: null }
  gate: GateResult | null = null
  dryRun: DryRun | null = null
  bodyChanges: readonly string[] = NO_CHANGES
  ended = false
  body: ForwardBody | null = null
  // The forward's (set by forwardStep).
  pathAndQuery = ''
  extraHeaders: OutgoingHttpHeaders | null = null
  timeoutMs = 0
  minBodyRate = 0
  traceparent: string | undefined = undefined
  upSpan: Span | undefined = undefined
  answered: (o: Outcome) => void = noop

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly flow: GatewayFlow,
    startedMs: number
  ) {
    this.method = req.method ?? 'GET'
    this.startedMs = startedMs
    this.requestId = requestIdOf(req)
    this.userAgent = userAgentOf(req)
    this.peer = peerOf(req)
    this.bytesIn = bytesInOf(req)
    this.span = flow.tracer != null ? requestSpan(flow.tracer, req) : undefined
    this.reply = new ResponseReply(res, this.requestId)
  }

  // ForwardRequest: what the body step decided.
  get upload(): ForwardBody['body'] {
    return this.body!.body
  }
  get paced(): boolean {
    return this.body!.paced
  }
  get pace(): BodyPace | undefined {
    return this.body!.pace
  }

  /** SPEC §4 "Answers": where a slow client's answer waits (none with buffer_response_bytes 0). */
  holdAnswer(): AnswerSpool | null {
    const { snapshot, admission } = this.gate as Pass
    const memory = snapshot.config.upstream.bufferResponseBytes
    if (memory === 0) return null
    const { budget, processes, tmpDir } = this.flow.sizeDeps
    return new AnswerSpool(
      budget,
      heldLimitsOf(snapshot.config.sizeLimits, processes),
      memory,
      snapshot.clientIp.keyOf(admission.clientIp),
      tmpDir
    )
  }

  /**
   * SPEC §4: the server's part is over: its slot, pool share and key's place go now, while a
   * slow client still takes its answer from what is held for it.
   */
  onUpstreamDone(upstreamMs: number | null): void {
    release(this, this.flow, upstreamMs)
  }

  done(r: ForwardResult): void {
    const { admission, snapshot } = this.gate as Pass
    if (this.upSpan !== undefined) endWith(this.upSpan, r.status, {})
    this.bytesOut = r.bytesOut
    this.givenBack = this.flow.guard.answered(admission, snapshot.config, r.status)
    this.answered(forwardOutcome(r, snapshot.config.sizeLimits.minBodyRate))
  }
}

const noop = (): void => {}

/** What a plain request's steps share: the spine's flow, and the forward's parts. */
interface GatewayFlow extends Flow {
  forwarder: Forwarder
  tracer: Tracer | null | undefined
}

/** The outcome of a forwarded call, from what the forwarder saw. */
export function forwardOutcome(r: ForwardResult, minBodyRate = 0): Outcome {
  if (r.error === SEND_TIMEOUT)
    return { kind: 'send_timeout', status: r.status, upstreamMs: r.upstreamMs }
  if (r.error === TOO_SLOW && r.status === 408)
    return { kind: 'body_timeout', message: tooSlowMessage(minBodyRate), why: 'min_body_rate' }
  if (r.status === 0) return { kind: 'client_aborted', upstreamMs: r.upstreamMs }
  if (r.error !== undefined) {
    return { kind: 'upstream_error', status: r.status, upstreamMs: r.upstreamMs, error: r.error }
  }
  return answeredOutcome(r.status, r.upstreamMs)
}

/** A plain request's answers of ours go to its response (one small object per request, no closures). */
class ResponseReply implements Reply {
  constructor(
    private readonly res: ServerResponse,
    private readonly requestId: string
  ) {}
  get client(): ServerResponse {
    return this.res
  }
  json(status: number, message: string, headers: OutgoingHttpHeaders | null): number {
    return sendJsonError(this.res, status, message, headers, this.requestId)
  }
  refusal(r: Refusal): number {
    return sendRefusal(this.res, r, this.requestId)
  }
  started(): boolean {
    return this.res.headersSent
  }
  cut(): void {
    this.res.destroy()
  }
}

/** The size room's needs: this process's body budget, and the metrics it feeds. */
function sizeDepsOf(deps: GatewayDeps, clock: Clock): SizeDeps {
  const metrics = deps.metrics
  const budget = new BufferBudget()
  // SPEC §4: the bytes held now, in memory and on disk, read at each scrape.
  metrics?.watchHeldBodies(() => ({ memory: budget.inMemory, disk: budget.onDisk }))
  return {
    budget,
    processes: deps.processes ?? 1,
    // Read once: os.tmpdir() reads the environment on every call (about 4 µs in an append's profile).
    tmpDir: deps.tmpDir ?? tmpdir(),
    onSpilled: () => metrics?.bodySpills.inc(),
    setTimer: (fn, ms) => {
      const t = clock.setTimer(fn, ms)
      return () => t.cancel()
    },
    now: () => clock.monotonic(),
  }
}

/** SPEC §4: each client's share of the upstream pool, as the snapshot in force sets it. */
function sharesOf(deps: GatewayDeps, clock: Clock): UpstreamShares {
  const shares = new UpstreamShares(() => {
    const { upstream, protect } = deps.snapshot().config
    return {
      total: upstream.maxConnections,
      perClient: upstream.maxConnectionsPerClient,
      waitMs: protect.queueMs,
      priority: protect.priority,
    }
  }, clock)
  deps.metrics?.watchShares(() => shares.state())
  return shares
}

/** The parts every call's steps share, made once. */
function flowOf(deps: GatewayDeps, clock: Clock, protector: Protector): GatewayFlow {
  const { logger } = deps
  // SPEC §4: keys not worth keeping count in their class's `others` (days, report, evidence).
  const keeper = new Keeper(
    () => {
      const snap = deps.snapshot()
      return { keepAfter: snap.config.usage.keepAfter, known: snap.known }
    },
    () => deps.snapshot().config.monthly.timezone
  )
  const report = deps.recorder
  const gateDeps = {
    ...deps,
    clock,
    recorder:
      report === undefined
        ? undefined
        : {
            record: (entryId: string, key: string, nowMs: number) =>
              report.record(entryId, keeper.keeps(key, nowMs) ? key : 'others', nowMs),
          },
  }
  const gate = createGate(gateDeps)
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
  return {
    forwarder: deps.forwarder,
    tracer: deps.tracer,
    gateDeps,
    clock,
    logger,
    gate,
    finish: createFinisher({ ...deps, clock }),
    sizeDeps: sizeDepsOf(deps, clock),
    guard,
    delayed,
    shares: sharesOf(deps, clock),
    account: createAccounting({
      usage: deps.usage,
      ledger: deps.ledger,
      notices: deps.notices,
      timezone: () => deps.snapshot().config.monthly.timezone,
      monthlyEnabled: () => deps.snapshot().config.monthly.enabled,
      shapes: deps.shapes,
      ipKeyOf: (ip) => deps.snapshot().clientIp.keyOf(ip),
      keeper,
      rules: () => deps.snapshot().config.rateLimits.rules,
    }),
  }
}

/** The gateway: its parts made once, and each request's call told its story. */
export function createGateway(deps: GatewayDeps): Gateway {
  const clock = deps.clock
  const protector = new Protector(() => deps.snapshot().config.protect, deps.processes ?? 1, clock)
  deps.metrics?.watchProtect(() => protector.state())
  const flow = flowOf(deps, clock, protector)

  function handleRequest(req: IncomingMessage, res: ServerResponse): void {
    // The access log's own fields (SPEC §7) and the story's, in one object per request.
    tell(new HttpCall(req, res, flow, clock.monotonic()), flow, story)
  }

  const upgrade = createUpgradeHandler({
    upstreamUrl: deps.upstreamUrl,
    flow,
    tracer: deps.tracer,
    processes: deps.processes,
  })
  return {
    handleRequest,
    handleUpgrade: upgrade.handle,
    tunnels: upgrade.tunnels,
    protector,
    shares: flow.shares,
  }
}
