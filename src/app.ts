import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Snapshot } from './config/snapshot.js'
import { bodyHistory } from './http/history-check.js'
import { createGate } from './http/gate.js'
import type { DryRun, Outcome } from './http/outcome.js'
import type { ForwardRequest, ForwardResult, Forwarder } from './http/proxy.js'
import { sendJsonError, sendRefusal } from './http/respond.js'
import { createUpgradeHandler } from './http/websocket.js'
import type { Logger } from './observe/log.js'
import type { Metrics } from './observe/metrics.js'
import { begin, createFinisher } from './observe/request-log.js'
import type { UsageSummary } from './observe/summary.js'
import { BufferBudget } from './size/body-buffer.js'
import { sizedBody, type SizeDeps } from './size/body.js'
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
  return {
    budget: new BufferBudget(),
    processes: deps.processes ?? 1,
    tmpDir: deps.tmpDir,
    onHeld: (spilled, bufferedBytes) => {
      if (spilled) metrics?.bodySpills.inc()
      metrics?.bodyBufferedBytes.set(bufferedBytes)
    },
  }
}

/** The request's way through: gate → size check → forward, and one finish() at every exit. */
export function createGateway(deps: GatewayDeps): Gateway {
  const { forwarder, logger } = deps
  const gate = createGate(deps)
  const finish = createFinisher(deps)
  const sizeDeps = sizeDepsOf(deps)

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const begun = begin(req)
    const id = begun.requestId
    const g = await gate(req)
    if (g.kind === 'refuse') {
      begun.bytesOut = sendRefusal(res, g, id)
      return finish(g, begun, g.outcome)
    }
    const { admission, path, snapshot } = g
    const done = (outcome: Outcome, dryRun: DryRun | null = g.dryRun) =>
      finish(g, begun, outcome, dryRun)

    const maybe = sizedBody(sizeDeps, req, snapshot, g)
    const sized = maybe instanceof Promise ? await maybe : maybe
    if (sized.kind === 'aborted')
      return done({ kind: 'client_aborted', upstreamMs: null }, g.dryRun)
    if (sized.kind === 'unavailable') {
      const headers = { ...admission.headers, 'retry-after': '1' }
      begun.bytesOut = sendJsonError(res, 503, sized.message, headers, id)
      return done({ kind: 'body_unavailable', message: sized.message })
    }
    if (sized.kind === 'refused') {
      sized.release()
      const r = sized.refusal
      // SPEC §4: nothing of the call reached the server. A body left unread closes the connection.
      res.setHeader('connection', 'close')
      begun.bytesOut = sendJsonError(res, r.status, r.message, admission.headers, id)
      return done({ kind: 'size_refused', ...r })
    }
    const dryRun = sized.broken === null ? g.dryRun : { ...g.dryRun, size: sized.broken }
    let body: ForwardRequest['body'] = sized.body
    if (g.pendingHistory.length > 0 && body === undefined) {
      const read = await bodyHistory(deps, req, g)
      if (read === null) return done({ kind: 'client_aborted', upstreamMs: null }, dryRun)
      body = read.body
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
      requestId: id,
      done: (r) => {
        sized.release()
        begun.bytesOut = r.bytesOut
        done(forwardOutcome(r), dryRun)
      },
    })
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
