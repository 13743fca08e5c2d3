import { every, sleep, type Clock } from '../clock.js'
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { ConnectionCaps, connectionCaps, openFileLimit } from './connection-caps.js'
import { createServer as createTlsServer, type Server as TlsServer } from 'node:https'
import { createGateway, type Gateway } from '../app.js'
import { UpgradeRecorder } from '../history/report-store.js'
import { MonthlyNotices } from '../usage/notices.js'
import { LedgerRecorder } from '../usage/ledger-recorder.js'
import { storeAddress } from '../limiter/redis-client.js'
import { MAX_SUBJECTS, UsageRecorder } from '../usage/recorder.js'
import { MAX_SERIES, ShapeRecorder } from '../tuning/recorder.js'
import type { BatchedFront } from '../batch/recorder.js'
import { holdContinue } from '../http/continue.js'
import { waitTurn } from './pipelined.js'
import { createForwarder, type Forwarder } from '../http/proxy.js'
import type { Config } from '../types.js'
import { resolveWorkers } from './worker-count.js'
import type { Core } from './core.js'

// The proxy port: node:http (the gateway needs Node's raw request and response: streaming,
// upgrades), the gateway behind it, and its draining on stop.

const DRAIN_MS = 10_000
/** How long the upstream pool may take to close once every client connection is gone. */
const CLOSE_POOL_MS = 2_000

/** A batched writer (batch/recorder.ts), by the name a stop gives what it could not write. */
export interface Recorded {
  lost: 'usage_day_counts' | 'team_monthly_calls' | 'upgrade_report' | 'tuning_evidence'
  writer: BatchedFront<unknown>
}

/** A process that serves the proxy port (alone, or as a worker). */
export interface Proxy {
  /** SPEC §5: the month's 80 % and 100 % lines. */
  notices: MonthlyNotices
  /**
   * This process's batched writers (the day counts, the teams' late calls, the tuning evidence,
   * the upgrade report) as one list: a flush and a stop are one loop over it.
   */
  recorders: readonly Recorded[]
  /** Store trouble, and what a stop could not write. */
  core: Core
  forwarder: Forwarder
  gateway: Gateway
  server: Server
  /** Client connections open now, whether the server accepted them or a primary handed them over. */
  connections: ReadonlySet<Socket>
  /** Re-reads listen.tls's files (SIGHUP, a reload): a renewed certificate, no restart. */
  reloadTls(): void
  /** The process's clock (draining's deadline). */
  clock: Clock
}

/** The PEM files of listen.tls, read now. */
function tlsFiles(tls: NonNullable<Config['listen']['tls']>): { cert: Buffer; key: Buffer } {
  return { cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) }
}

/**
 * Slowloris: a request head (and a whole request) must arrive in time; an idle keep-alive
 * connection closes after listen.keepalive_timeout_ms; a connection past a cap is answered 503
 * (SPEC §4) before anything else reads it.
 */
function createProxyServer(config: Config, gateway: Gateway, caps: ConnectionCaps): Server {
  const { headersTimeoutMs, requestTimeoutMs, keepaliveTimeoutMs } = config.listen
  // Node checks these timers only every connectionsCheckingInterval (30 s by default): check
  // often enough that the limits mean what they say.
  const tightest = Math.min(headersTimeoutMs, requestTimeoutMs || Infinity)
  const options = {
    headersTimeout: headersTimeoutMs,
    requestTimeout: requestTimeoutMs,
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(tightest / 4))),
  }
  const tls = config.listen.tls
  // One listener for every answer (its `this`), not a closure and a once-wrapper a call (SPEC §12).
  function answerClosed(this: ServerResponse): void {
    caps.ended(this.req.socket)
  }
  const begin = (req: IncomingMessage, res: ServerResponse): void => {
    // SPEC §4: a connection with a call in progress never yields to a newcomer.
    caps.began(req.socket)
    res.on('close', answerClosed)
    gateway.handleRequest(req, res)
  }
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket
    if (caps.isRefused(socket)) return caps.answer(req, res)
    if (res.socket !== null) return begin(req, res)
    // Pipelined behind an unfinished answer: it waits its turn (pipelined.ts).
    const refuse = () => caps.refusePipelined(req, res)
    if (!waitTurn(socket, res, () => begin(req, res), refuse)) socket.destroy()
  }
  // listen.tls: HTTPS on the proxy port (the files were read and checked at load).
  const proxy: Server =
    tls === null
      ? createServer(options, onRequest)
      : (createTlsServer({ ...options, ...tlsFiles(tls) }, onRequest) as Server)
  // Node reads this from the server, not from createServer's options.
  proxy.keepAliveTimeout = keepaliveTimeoutMs
  proxy.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (caps.isRefused(socket)) return caps.answerRaw(socket)
    caps.began(socket)
    gateway.handleUpgrade(req, socket, head)
  })
  // SPEC §4: 100 Continue only after the head's checks (the request path sends it).
  proxy.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    holdContinue(req, res)
    onRequest(req, res)
  })
  proxy.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // Malformed requests (smuggling attempts, oversized headers) and too-slow clients never
    // reach the gateway. Answer as Node would, then close for good: a half-close would let a
    // slowloris client keep the socket by writing on.
    const status =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? '408 Request Timeout'
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? '431 Request Header Fields Too Large'
          : '400 Bad Request'
    if (!socket.writable) return socket.destroy()
    socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`, () =>
      socket.destroy()
    )
  })
  return proxy
}

/** The recorders' options: this process's id, its clock, and store trouble said once a minute. */
function recorderOptions(core: Core, what: string, then: string) {
  return {
    instance: core.instance,
    clock: core.runtime.clock,
    onError: (err: unknown) => core.trouble.failed(`${what} could not be written`, then, err),
    onBack: () => core.trouble.back(`${what} could not be written`, 'what was held is written'),
  }
}

const KEPT = 'kept, and written when the store answers'

/**
 * SPEC §5, §8: this process's batched counts (a base's days, a team's late calls, the upgrade
 * report), written every few seconds (≤ 5 s), and the month's notices.
 */
function recordersOf(core: Core) {
  const timezone = () => core.holder.current.config.monthly.timezone
  const usage = new UsageRecorder(core.stores.usage, {
    ...recorderOptions(core, 'usage day counts', KEPT),
    timezone,
    onDropped: (calls) =>
      core.logger.warn(
        { calls, max_bases: MAX_SUBJECTS },
        'usage day counts: calls of bases past the per-interval bound were not counted by base'
      ),
  })
  const ledger = new LedgerRecorder(
    core.stores.ledger,
    recorderOptions(core, "teams' monthly calls", `${KEPT} (the month catches up then)`)
  )
  const recorder = new UpgradeRecorder(
    core.stores.report,
    recorderOptions(core, 'upgrade report counts', KEPT)
  )
  const shapes = new ShapeRecorder(core.stores.shapes, {
    ...recorderOptions(core, 'tuning evidence', KEPT),
    timezone,
    onDropped: (calls) =>
      core.logger.warn(
        { calls, max_series: MAX_SERIES },
        'tuning evidence: calls of key-days past the per-interval bound were not kept'
      ),
  })
  usage.start(core.runtime.usageFlushMs)
  shapes.start(core.runtime.usageFlushMs)
  ledger.start(core.runtime.usageFlushMs)
  recorder.start(core.runtime.reportFlushMs)
  const recorders: Recorded[] = [
    { lost: 'usage_day_counts', writer: usage },
    { lost: 'tuning_evidence', writer: shapes },
    { lost: 'team_monthly_calls', writer: ledger },
    { lost: 'upgrade_report', writer: recorder },
  ]
  const noticeTrouble = 'a monthly quota notice could not be decided'
  const notices = new MonthlyNotices(core.stores.ledger, core.logger, {
    token: core.instance,
    clock: core.runtime.clock,
    onError: (err) => core.trouble.failed(noticeTrouble, 'asked again every 5 s', err),
    onBack: () => core.trouble.back(noticeTrouble, 'notices are decided again'),
  })
  return { usage, ledger, recorder, notices, shapes, recorders }
}

/** Writes what every recorder holds now (the admin API's reads of usage and tuning, a worker asked). */
export async function flushRecorders(p: Pick<Proxy, 'recorders'>): Promise<void> {
  await Promise.all(p.recorders.map((r) => r.writer.flush()))
}

export function createProxy(core: Core): Proxy {
  const config = core.holder.current.config
  const { usage, ledger, recorder, notices, shapes, recorders } = recordersOf(core)
  const forwarder = createForwarder({
    clock: core.runtime.clock,
    url: config.upstream.url,
    connections: config.upstream.maxConnections,
  })
  const gateway = createGateway({
    serverVersion: () => core.serverVersion.current(),
    recorder,
    snapshot: () => core.holder.current,
    store: core.stores.windows,
    forwarder,
    logger: core.logger,
    upstreamUrl: config.upstream.url,
    metrics: core.metrics,
    summary: core.summary,
    status: core.status,
    usage,
    ledger,
    notices,
    shapes,
    tracer: core.tracing?.tracer ?? null,
    clock: core.runtime.clock,
    // SPEC §4: workers share size_limits.buffer_bytes; each holds its share.
    processes: resolveWorkers(config.workers),
  })
  const processes = resolveWorkers(config.workers)
  const nofile = openFileLimit()
  const caps = new ConnectionCaps({
    caps: () => connectionCaps(core.holder.current.config, processes, nofile),
    snapshot: () => core.holder.current,
    clock: core.runtime.clock,
    logger: core.logger,
    metrics: core.metrics,
  })
  const server = createProxyServer(config, gateway, caps)
  const connections = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    caps.admit(socket)
    connections.add(socket)
    socket.once('close', () => connections.delete(socket))
  })
  const reloadTls = () => {
    // The paths are restart-only: the running ones are re-read (a certificate renewed in place).
    const tls = core.holder.current.config.listen.tls
    if (tls === null || !('setSecureContext' in server)) return
    try {
      ;(server as unknown as TlsServer).setSecureContext(tlsFiles(tls))
      core.logger.info({ cert_file: tls.certFile }, 'TLS certificate re-read')
    } catch (err) {
      core.logger.error({ err }, 'TLS files could not be re-read; the running certificate stays')
    }
  }
  core.afterReload.push(reloadTls)
  return {
    notices,
    recorders,
    core,
    forwarder,
    gateway,
    server,
    connections,
    reloadTls,
    clock: core.runtime.clock,
  }
}

/**
 * SPEC §1/§6: stop accepting, let in-flight requests and tunnels finish (≤ 10 s). Waits on the
 * connections themselves, so a worker, whose server never listens (its primary hands it the
 * connections), drains as a process serving alone does.
 */
export async function drainProxy(p: Proxy): Promise<void> {
  const clock = p.clock
  const deadline = clock.monotonic() + DRAIN_MS
  if (p.server.listening) p.server.close()
  // Keep-alive connections that finish their request are closed as they go idle.
  const sweep = every(clock, 50, () => p.server.closeIdleConnections())
  p.server.closeIdleConnections()
  while ((p.connections.size > 0 || p.gateway.tunnels.size > 0) && clock.monotonic() < deadline)
    await sleep(clock, 50)
  sweep.cancel()
  p.server.closeAllConnections()
  for (const t of p.gateway.tunnels) t.destroy()
  for (const c of p.connections) c.destroy()
  // Every client is gone, so every upstream call has been stopped; should one still hold its
  // connection, the pool is closed by force rather than the process never exiting.
  const closed = await Promise.race([
    p.forwarder.close().then(
      () => true,
      () => true
    ),
    sleep(clock, CLOSE_POOL_MS).then(() => false),
  ])
  if (!closed) await p.forwarder.destroy().catch(() => {})
  await stopRecorders(p)
}

/** How long a stop waits for the store to take what the recorders hold. */
const FINAL_WRITE_MS = 3_000

/**
 * SIGTERM (issue #40 item 9): what the recorders hold is written before the exit, trying for
 * FINAL_WRITE_MS while the store does not answer; what could not be is said, not kept quiet.
 */
async function stopRecorders(p: Proxy): Promise<void> {
  p.notices.stop()
  const left = await Promise.all(
    p.recorders.map(async (r) => [r.lost, await r.writer.stop(FINAL_WRITE_MS).catch(() => -1)])
  )
  const lost = Object.fromEntries(left) as Record<Recorded['lost'], number>
  if (left.some(([, n]) => n !== 0))
    p.core.logger.warn(
      { ...lost, store: storeAddress(p.core.holder.current.config.store) },
      `stopping: the store did not take what was held within ${FINAL_WRITE_MS} ms; these calls are not in its counts`
    )
}

export { DRAIN_MS }
