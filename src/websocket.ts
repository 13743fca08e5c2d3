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
import { nothingHeld, on, type Arrived, type Next, type Passed, type Reply } from './spine/call.js'
import { gateStep, keyShareStep, slotStep, tell, type Flow } from './spine/steps.js'

// SPEC §6: WebSocket upgrades (the service's /socket.io/ real-time socket) pass through.
// The upgrade request is rate-checked like any other; after the 101 the two sockets are
// piped to each other. Tunnels bypass the pool: each holds its own upstream connection.

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

export interface UpgradeOptions {
  upstreamUrl: string
  /** The steps' shared parts (the gateway's). */
  flow: Flow
  /** Issue #25: OpenTelemetry, when an OTLP endpoint is configured. */
  tracer?: Tracer | null
}

/** After the 101: each side's early bytes to the other, then the two sockets piped together. */
function joinTunnel(
  client: { socket: Duplex; head: Buffer },
  upstream: { socket: Duplex; head: Buffer },
  tunnels: Set<Duplex>
): void {
  const { socket } = client
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
  flow: Flow
}

/** To the server: its 101 joins the tunnel (the slot and the key's place go with it). */
function tunnelStep(call: UpgradeCall & Passed, upstream: Upstream): Promise<Outcome> {
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
      joinTunnel({ socket, head }, { socket: upstreamSocket, head: upstreamHead }, tunnels)
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
          on(slotStep(plain, flow), (slotted) => tunnelStep(slotted, upstream))
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
