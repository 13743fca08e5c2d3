import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable, type Duplex } from 'node:stream'
import type { Snapshot } from './config/snapshot.js'
import { createGate, historyOf, type Pass } from './http/gate.js'
import { readBodyUpTo, replayThenRest } from './http/read-body.js'
import type { DryRun, Outcome } from './http/outcome.js'
import type { ForwardResult, Forwarder } from './http/proxy.js'
import { sendJsonError, sendRefusal } from './http/respond.js'
import { checkSize } from './http/size-gate.js'
import { sizeCheckFor } from './http/size-limits.js'
import { createUpgradeHandler } from './http/websocket.js'
import type { Logger } from './observe/log.js'
import type { Metrics } from './observe/metrics.js'
import { createFinisher } from './observe/request-log.js'
import type { UsageSummary } from './observe/summary.js'
import type { LimiterStore } from './types.js'

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
  now?: () => number
  /** SPEC §8: the server's version, or null while unknown. */
  serverVersion?: () => string | null
  /** SPEC §8: the upgrade report's counter (batched). */
  recorder?: { record(entryId: string, key: string, nowMs: number): void }
}

export interface Gateway {
  handleRequest(req: IncomingMessage, res: ServerResponse): void
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void
  /** Open WebSocket tunnels, for graceful shutdown. */
  readonly tunnels: ReadonlySet<Duplex>
}

/** The outcome of a forwarded call, from what the forwarder saw. */
export function forwardOutcome(r: ForwardResult): Outcome {
  if (r.refusal !== undefined) return { kind: 'size_refused', ...r.refusal }
  if (r.status === 0) return { kind: 'client_aborted', upstreamMs: r.upstreamMs }
  if (r.error !== undefined) {
    return { kind: 'upstream_error', status: r.status, upstreamMs: r.upstreamMs, error: r.error }
  }
  return { kind: 'forwarded', status: r.status, upstreamMs: r.upstreamMs }
}

/** The request's way through: gate → size check → forward, and one finish() at every exit. */
export function createGateway(deps: GatewayDeps): Gateway {
  const { forwarder, logger } = deps
  const gate = createGate(deps)
  const finish = createFinisher(deps)

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedMs = performance.now()
    const method = req.method ?? 'GET'
    const g = await gate(req)
    if (g.kind === 'refuse') {
      sendRefusal(res, g)
      const { path, admission, outcome } = g
      const apiChanges = g.history.breaking.map((e) => e.id)
      return finish({ method, path, admission, startedMs, outcome, dryRun: null, apiChanges })
    }
    const { admission, path, snapshot } = g
    const apiChanges = g.history.breaking.map((e) => e.id)
    const done = (outcome: Outcome, dryRun: DryRun | null) =>
      finish({ method, path, admission, startedMs, outcome, dryRun, apiChanges })

    const sized = await sizeChecked(req, g)
    if (sized.kind === 'aborted')
      return done({ kind: 'client_aborted', upstreamMs: null }, g.dryRun)
    if (sized.kind === 'refused') {
      const r = sized.refusal
      // A body left unread past max_body_bytes is not read: the connection closes.
      if (r.status === 413) res.setHeader('connection', 'close')
      sendJsonError(res, r.status, r.message, admission.headers)
      return done({ kind: 'size_refused', ...r }, g.dryRun)
    }
    let body = sized.body
    if (g.pendingHistory.length > 0 && body === undefined) {
      const read = await bodyHistory(req, g, apiChanges)
      if (read === null) return done({ kind: 'client_aborted', upstreamMs: null }, g.dryRun)
      body = read
    }
    forwarder.forward({
      req,
      res,
      pathAndQuery: path + g.query,
      extraHeaders:
        g.history.headers === null
          ? admission.headers
          : { ...admission.headers, ...g.history.headers },
      body,
      timeoutMs: snapshot.config.upstream.timeoutMs,
      done: (r) => {
        // Dry-run: a streamed body's broken rule is known once it was read.
        const late = sized.streamed?.violation() ?? null
        const dryRun =
          late !== null && r.refusal === undefined ? { ...sized.dryRun, size: late } : sized.dryRun
        done(forwardOutcome(r), dryRun)
      },
    })
  }

  /**
   * SPEC §8 changes recognised by the body (Move Rows to Big Data without `view_name`): the
   * body is read (up to max_body_bytes) and forwarded as read. Null when the client left.
   */
  async function bodyHistory(
    req: IncomingMessage,
    g: Pass,
    apiChanges: string[]
  ): Promise<Buffer | Readable | null> {
    const read = await readBodyUpTo(req, g.snapshot.config.sizeLimits.maxBodyBytes)
    if (read.kind === 'aborted') return null
    // Too large to look at: forwarded as it comes, unrecognised.
    if (read.kind === 'too_large')
      return Readable.from(replayThenRest(read.chunks, req), { objectMode: false })
    let json: unknown = null
    try {
      json = JSON.parse(read.body.toString('utf8'))
    } catch {
      // Not JSON: the server judges it; the change is about a field of a JSON body.
    }
    const lacking = g.pendingHistory.filter(
      (m) =>
        json !== null &&
        typeof json === 'object' &&
        !Array.isArray(json) &&
        !(m.bodyWithout! in json)
    )
    const method = req.method ?? 'GET'
    const h = historyOf(
      deps,
      g.snapshot,
      { method, path: g.path, query: g.query },
      lacking.map((m) => ({ ...m, bodyWithout: null }))
    )
    const nowMs = (deps.now ?? Date.now)()
    for (const e of h.breaking) {
      deps.recorder?.record(e.id, g.admission.classification.key, nowMs)
      apiChanges.push(e.id)
    }
    return read.body
  }

  type Sized =
    | { kind: 'aborted' }
    | { kind: 'refused'; refusal: NonNullable<DryRun['size']> }
    | {
        kind: 'ok'
        body: Buffer | Readable | undefined
        dryRun: DryRun | null
        streamed?: { violation(): NonNullable<DryRun['size']> | null }
      }

  /** SPEC §4 size limits, after the rate check: a size-refused call has used its slot. */
  async function sizeChecked(req: IncomingMessage, g: Pass): Promise<Sized> {
    const method = req.method ?? 'GET'
    const check = sizeCheckFor(method, g.path)
    if (check === null) return { kind: 'ok', body: undefined, dryRun: g.dryRun }
    const dryRunMode = g.snapshot.config.mode === 'dry-run'
    const size = await checkSize(check, req, g.query, g.snapshot.config.sizeLimits, {
      keepRestForDryRun: dryRunMode,
    })
    if (size.aborted) return { kind: 'aborted' }
    if (size.refusal === undefined) {
      return { kind: 'ok', body: size.body, dryRun: g.dryRun, streamed: size.streamed }
    }
    if (!dryRunMode) return { kind: 'refused', refusal: size.refusal }
    return { kind: 'ok', body: size.body, dryRun: { ...g.dryRun, size: size.refusal } }
  }

  function handleRequest(req: IncomingMessage, res: ServerResponse): void {
    handle(req, res).catch((err: unknown) => {
      // Nothing a request does may crash the process; the client gets a 500 or a closed socket.
      logger.error({ err }, 'request failed')
      if (!res.headersSent) sendJsonError(res, 500, 'internal error')
      else res.destroy()
    })
  }

  const upgrade = createUpgradeHandler({ upstreamUrl: deps.upstreamUrl, logger, gate, finish })
  return { handleRequest, handleUpgrade: upgrade.handle, tunnels: upgrade.tunnels }
}
