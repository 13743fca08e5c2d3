import {
  request as httpRequest,
  STATUS_CODES,
  type IncomingMessage,
  type OutgoingHttpHeaders,
} from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { Duplex } from 'node:stream'
import type { Tracer } from '@opentelemetry/api'
import { begin, NO_CHANGES } from './observe/request-log.js'
import { requestSpan } from './observe/tracing.js'
import { answeredOutcome, type Outcome, type Refusal } from './http/call.js'
import { upstreamRequestHeaders } from './http/proxy.js'
import { jsonError } from './http/respond.js'
import { sizeCheckFor } from './size/actions.js'
import {
  nothingHeld,
  on,
  type Arrived,
  type Next,
  type Passed,
  type Reply,
  type Slotted,
} from './spine/call.js'
import { gateStep, keyShareStep, slotStep, tell, type Flow } from './spine/steps.js'

// SPEC §4, §6: WebSocket upgrades of the service's real-time socket (/socket.io/) pass through;
// any other Upgrade (h2c, a made-up token, a path that is not a socket) is answered 400 and
// nothing is forwarded: a tunnel carries bytes no size check reads. The upgrade request is
// rate-checked like any other; after the 101 the two sockets are piped to each other. Tunnels
// bypass the pool (each holds its own upstream connection), so they have caps of their own
// (upstream.max_tunnels, and one client's max_connections_per_client of them), and a tunnel
// with no byte either way for upstream.tunnel_idle_ms is closed.

/** An HTTP/1.1 response head from a flat [name, value, …] list (no ServerResponse exists for upgrades). */
function rawHead(
  status: number,
  message: string | undefined,
  pairs: readonly (string | number)[]
): string {
  let head = `HTTP/1.1 ${status} ${message || STATUS_CODES[status] || ''}\r\n`
  for (let i = 0; i < pairs.length; i += 2) head += `${pairs[i]}: ${pairs[i + 1]}\r\n`
  return head + '\r\n'
}

/** Writes a whole answer of ours on the raw socket, and ends it. */
function writeRaw(
  socket: Duplex,
  status: number,
  headers: Record<string, string | number>,
  body = ''
): void {
  if (!socket.writable) {
    socket.destroy()
    return
  }
  socket.end(rawHead(status, undefined, Object.entries(headers).flat()) + body)
}

/** An error answer of ours on the raw socket; returns its body's bytes. */
function jsonFail(
  socket: Duplex,
  status: number,
  message: string,
  extra?: OutgoingHttpHeaders | null
): number {
  const { headers, body } = jsonError(message, extra)
  writeRaw(
    socket,
    status,
    { ...headers, connection: 'close' } as Record<string, string | number>,
    body
  )
  return Buffer.byteLength(body)
}

function sendRefusal(socket: Duplex, r: Refusal): number {
  if (r.message !== null) return jsonFail(socket, r.status, r.message, r.headers)
  const headers = (r.headers ?? {}) as Record<string, string | number>
  writeRaw(socket, r.status, { ...headers, 'content-length': 0, connection: 'close' })
  return 0
}

const NOT_HERE = 'an Upgrade request is not accepted on an endpoint with a size limit'

/**
 * The service's socket paths: the web app's `/socket.io/` (SERVICE.md), and the pre-5.3
 * server's `/dtable-server/socket.io/` (its real-time socket lived under /dtable-server/ until
 * 5.3 removed that family). A prefix, case-insensitive, trailing `/` optional.
 */
const SOCKET_PATHS = ['/socket.io', '/dtable-server/socket.io']

/** Whether the (normalised) path is one of the service's socket paths. */
export function isSocketPath(path: string): boolean {
  const p = path.toLowerCase()
  return SOCKET_PATHS.some((s) => p === s || p.startsWith(`${s}/`))
}

/** Whether the Upgrade header asks for a WebSocket, and nothing else. */
export function isWebSocketUpgrade(upgrade: string | undefined): boolean {
  return upgrade !== undefined && upgrade.trim().toLowerCase() === 'websocket'
}

export const TUNNEL_MESSAGE =
  'too many WebSocket tunnels are open (upstream.max_tunnels, or this client has max_connections_per_client of them); try again shortly'

export interface UpgradeOptions {
  upstreamUrl: string
  /** The steps' shared parts (the gateway's). */
  flow: Flow
  /** Issue #25: OpenTelemetry, when an OTLP endpoint is configured. */
  tracer?: Tracer | null
  /** Processes sharing the caps (workers): each holds its share of upstream.max_tunnels. */
  processes?: number
}

/** SPEC §4: tunnels open, in all and per client, within their caps. */
class TunnelCaps {
  private open = 0
  private readonly byClient = new Map<string, number>()

  /** A place for a tunnel of `client`, or false when a cap is reached; give it back with leave(). */
  take(client: string, max: number, perClient: number): boolean {
    const own = this.byClient.get(client) ?? 0
    if (this.open >= max || own >= perClient) return false
    this.open++
    this.byClient.set(client, own + 1)
    return true
  }

  leave(client: string): void {
    const own = this.byClient.get(client)
    if (own === undefined) return
    this.open--
    if (own <= 1) this.byClient.delete(client)
    else this.byClient.set(client, own - 1)
  }
}

/**
 * After the 101: each side's early bytes to the other, then the two sockets piped together. No
 * byte either way for `idleMs` closes both (the client's socket sees every byte of the tunnel:
 * what it reads and what it is written).
 */
function joinTunnel(
  client: { socket: Duplex; head: Buffer },
  upstream: { socket: Duplex; head: Buffer },
  tunnels: Set<Duplex>,
  idleMs: number
): void {
  const { socket } = client
  const timed = socket as Duplex & { setTimeout?: (ms: number, cb: () => void) => void }
  timed.setTimeout?.(idleMs, () => socket.destroy())
  if (upstream.head.length > 0) socket.write(upstream.head)
  if (client.head.length > 0) upstream.socket.write(client.head)
  upstream.socket.on('error', () => socket.destroy())
  socket.on('close', () => upstream.socket.destroy())
  upstream.socket.on('close', () => socket.destroy())
  upstream.socket.pipe(socket)
  socket.pipe(upstream.socket)
  tunnels.add(socket)
  socket.once('close', () => tunnels.delete(socket))
}

/** The answer to an upgrade whose upstream failed: 504 on its timeout, else 502. */
function upstreamFailure(err: NodeJS.ErrnoException): { status: number; text: string } {
  if (err.code === 'ETIMEDOUT') return { status: 504, text: 'the upstream sent no answer in time' }
  return { status: 502, text: `the upstream could not be reached (${err.code ?? 'error'})` }
}

/** An upgrade's answers of ours go to its raw socket (there is no ServerResponse). */
class SocketReply implements Reply {
  private written = false
  constructor(private readonly socket: Duplex) {}
  get client(): Duplex {
    return this.socket
  }
  json(status: number, message: string, headers: OutgoingHttpHeaders | null): number {
    this.written = true
    return jsonFail(this.socket, status, message, headers)
  }
  refusal(r: Refusal): number {
    this.written = true
    return sendRefusal(this.socket, r)
  }
  started(): boolean {
    return this.written
  }
  cut(): void {
    this.socket.destroy()
  }
}

/** An upgrade's record: its socket and the bytes that came after its head. */
interface UpgradeCall extends Arrived {
  readonly socket: Duplex
  readonly head: Buffer
}

/** Issue #11: an Upgrade header must not carry a call past the size checks (400). */
function uncheckedStep<C extends Passed>(call: C): Next<C> {
  if (sizeCheckFor(call.method, call.gate.route) === null) return call
  call.bytesOut = call.reply.json(400, NOT_HERE, call.gate.admission.headers)
  return { kind: 'size_refused', status: 400, message: NOT_HERE }
}

/** Where upgrades go, made once. */
interface Upstream {
  url: URL
  basePath: string
  send: typeof httpRequest
  tunnels: Set<Duplex>
  caps: TunnelCaps
  processes: number
  flow: Flow
}

/**
 * SPEC §4: only a WebSocket on a socket path goes on (else 400, nothing forwarded), and only
 * within the tunnels' caps (else 503 with retry-after); the place taken is given back when
 * the call ends without a tunnel, or when the tunnel closes.
 */
function tunnelPlaceStep<C extends Passed & UpgradeCall>(call: C, upstream: Upstream): Next<C> {
  const { req } = call
  if (!isWebSocketUpgrade(req.headers.upgrade) || !isSocketPath(call.gate.route)) {
    const reason = isWebSocketUpgrade(req.headers.upgrade)
      ? 'a WebSocket is accepted only on the service socket paths (/socket.io/, /dtable-server/socket.io/)'
      : `Upgrade ${JSON.stringify((req.headers.upgrade ?? '').slice(0, 32))} is not accepted (only websocket, on /socket.io/)`
    call.bytesOut = call.reply.json(400, reason, null)
    return { kind: 'bad_request', reason }
  }
  const { config, clientIp } = call.gate.snapshot
  const n = Math.max(1, upstream.processes)
  const max = Math.max(1, Math.ceil(config.upstream.maxTunnels / n))
  const perClient = Math.max(1, Math.ceil(config.listen.maxConnectionsPerClient / n))
  const client = clientIp.keyOf(call.gate.admission.clientIp)
  if (!upstream.caps.take(client, max, perClient)) {
    call.bytesOut = call.reply.json(503, TUNNEL_MESSAGE, { 'retry-after': '1' })
    return { kind: 'upstream_share' }
  }
  // Held like any other part: end() gives it back, whatever ends the call (a refusal, a
  // failure, a step that throws, a client gone), unless a tunnel took it over.
  call.held.tunnel = () => upstream.caps.leave(client)
  return call
}

/** To the server: its 101 joins the tunnel (the slot and the key's place go with it). */
function tunnelStep(call: UpgradeCall & Slotted, upstream: Upstream): Promise<Outcome> {
  const { url, basePath, send, tunnels, flow } = upstream
  const { socket, head, req } = call
  const { path, query, snapshot } = call.gate
  const upstreamReq = send({
    host: url.hostname,
    port: url.port || (url.protocol === 'https:' ? 443 : 80),
    method: call.method,
    path: basePath + path + query,
    headers: upstreamRequestHeaders(req, { keepUpgrade: true, requestId: call.requestId }),
    timeout: snapshot.config.upstream.timeoutMs,
  })
  const sinceStart = () => flow.clock.monotonic() - call.startedMs
  return new Promise<Outcome>((resolve) => {
    upstreamReq.on('timeout', () =>
      upstreamReq.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }))
    )
    upstreamReq.on('error', (err: NodeJS.ErrnoException) => {
      const { status, text } = upstreamFailure(err)
      call.bytesOut = jsonFail(socket, status, text)
      call.givenBack = flow.guard.answered(call.gate.admission, snapshot.config, status)
      resolve({ kind: 'upstream_error', status, upstreamMs: null, error: err.code ?? 'error' })
    })
    // The upstream declined the upgrade: relay its answer as is.
    upstreamReq.on('response', (res) => {
      socket.write(rawHead(res.statusCode ?? 502, res.statusMessage, res.rawHeaders))
      res.pipe(socket)
      const status = res.statusCode ?? 0
      call.givenBack = flow.guard.answered(call.gate.admission, snapshot.config, status)
      resolve(answeredOutcome(status, sinceStart()))
    })
    upstreamReq.on('upgrade', (res, upstreamSocket, upstreamHead) => {
      const upstreamMs = sinceStart()
      upstreamReq.setTimeout(0)
      socket.write(rawHead(res.statusCode ?? 101, res.statusMessage, res.rawHeaders))
      const idleMs = snapshot.config.upstream.tunnelIdleMs
      joinTunnel({ socket, head }, { socket: upstreamSocket, head: upstreamHead }, tunnels, idleMs)
      // The tunnel holds its place until it closes.
      const leave = call.held.tunnel
      call.held.tunnel = null
      if (leave !== null) socket.once('close', leave)
      resolve({ kind: 'forwarded', status: 101, upstreamMs })
    })
    upstreamReq.end()
  })
}

export function createUpgradeHandler(opts: UpgradeOptions) {
  const url = new URL(opts.upstreamUrl)
  const tunnels = new Set<Duplex>()
  const { flow } = opts
  const upstream: Upstream = {
    url,
    basePath: url.pathname.replace(/\/+$/, ''),
    send: url.protocol === 'https:' ? httpsRequest : httpRequest,
    tunnels,
    caps: new TunnelCaps(),
    processes: opts.processes ?? 1,
    flow,
  }

  /**
   * An upgrade's story: the plain request's steps (gate, key share, slot) with its own forward;
   * only the service's real-time socket upgrades, so a checked endpoint never does.
   */
  function story(call: UpgradeCall): Next<Outcome> {
    return on(gateStep(call, flow), (passed) =>
      on(keyShareStep(passed, flow), (keyed) =>
        on(uncheckedStep(keyed), (plain) =>
          on(tunnelPlaceStep(plain, upstream), (placed) =>
            on(slotStep(placed, flow), (slotted) => tunnelStep(slotted, upstream))
          )
        )
      )
    )
  }

  function handle(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy())
    const call: UpgradeCall = {
      ...begin(req, flow.clock),
      span: opts.tracer != null ? requestSpan(opts.tracer, req) : undefined,
      req,
      socket,
      head,
      reply: new SocketReply(socket),
      held: nothingHeld(),
      gate: null,
      dryRun: null,
      bodyChanges: NO_CHANGES,
      ended: false,
    }
    tell(call, flow, story)
  }

  return { handle, tunnels }
}
