import {
  request as httpRequest,
  STATUS_CODES,
  type IncomingMessage,
  type OutgoingHttpHeaders,
} from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { Duplex } from 'node:stream'
import type { Clock } from './clock.js'
import type { Logger } from './observe/log.js'
import { begin, type Finish } from './observe/request-log.js'
import type { Gate } from './http/gate.js'
import { statusOf, type Outcome, type Pass, type Refusal } from './http/call.js'
import { upstreamRequestHeaders } from './http/proxy.js'
import { jsonError } from './http/respond.js'
import { sizeCheckFor } from './size/actions.js'
import { KEY_BUSY_MESSAGE, SHED_MESSAGE, type CallGuard } from './protect/call-guard.js'
import type { SlotTicket } from './protect/protector.js'

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

function jsonFail(
  socket: Duplex,
  status: number,
  message: string,
  extra?: OutgoingHttpHeaders | null
): void {
  const { headers, body } = jsonError(message, extra)
  writeRaw(
    socket,
    status,
    { ...headers, connection: 'close' } as Record<string, string | number>,
    body
  )
}

function sendRefusal(socket: Duplex, r: Refusal): void {
  if (r.message !== null) return jsonFail(socket, r.status, r.message, r.headers)
  const headers = (r.headers ?? {}) as Record<string, string | number>
  writeRaw(socket, r.status, { ...headers, 'content-length': 0, connection: 'close' })
}

const NOT_HERE = 'an Upgrade request is not accepted on an endpoint with a size limit'

export interface UpgradeOptions {
  upstreamUrl: string
  logger: Logger
  gate: Gate
  finish: Finish
  /** SPEC §9: an upgrade holds a slot at the server until its 101 (or its answer). */
  guard?: CallGuard
  clock: Clock
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

/**
 * SPEC §9 for an upgrade: its key's place and a slot at the server. The ticket to release
 * once the upstream answered; null when no guard applies; false when the call ended here
 * (answered 429 or 503, or the client left), its outcome handed to `ended`.
 */
async function holdSlot(
  guard: CallGuard | undefined,
  socket: Duplex,
  g: Pass,
  ended: (o: Outcome, givenBack: boolean) => void
): Promise<SlotTicket | null | false> {
  if (guard === undefined) return null
  const { admission, snapshot } = g
  const busy = guard.enterKey(admission)
  if (busy !== null) {
    const { headers, givenBack } = await busy
    jsonFail(socket, 429, KEY_BUSY_MESSAGE, headers)
    ended({ kind: 'key_in_flight' }, givenBack)
    return false
  }
  const maybe = guard.slot(admission, socket)
  const slot = maybe instanceof Promise ? await maybe : maybe
  if (slot.result === 'granted') return slot.ticket
  const givenBack = slot.givenBack === true
  if (slot.result === 'cancelled') ended({ kind: 'client_aborted', upstreamMs: null }, givenBack)
  else {
    jsonFail(socket, 503, SHED_MESSAGE, guard.shedHeaders(admission, snapshot.config))
    ended({ kind: 'shed', waitedMs: slot.waitedMs }, givenBack)
  }
  return false
}

export function createUpgradeHandler(opts: UpgradeOptions) {
  const url = new URL(opts.upstreamUrl)
  const basePath = url.pathname.replace(/\/+$/, '')
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  const tunnels = new Set<Duplex>()

  async function run(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const begun = begin(req, opts.clock)
    const { method, startedMs } = begun
    socket.on('error', () => socket.destroy())
    const g = await opts.gate(req)
    if (g.kind === 'refuse') {
      sendRefusal(socket, g)
      return opts.finish(g, begun, g.outcome)
    }
    const { admission, path, query, snapshot } = g
    const done = (outcome: Outcome) => opts.finish(g, begun, outcome)
    // Issue #11: an Upgrade header must not carry a call past the size checks. Only the
    // service's real-time socket upgrades; a checked endpoint never does.
    if (sizeCheckFor(method, g.route) !== null) {
      jsonFail(socket, 400, NOT_HERE, admission.headers)
      return done({ kind: 'size_refused', status: 400, message: NOT_HERE })
    }
    const held = await holdSlot(opts.guard, socket, g, (o, givenBack) => {
      begun.givenBack = givenBack
      done(o)
    })
    if (held === false) return
    // The slot and the key's place go with the 101 (or whatever else answered the upgrade).
    const end = (o: Extract<Outcome, { upstreamMs: number | null }>) => {
      const r = { status: statusOf(o), upstreamMs: o.upstreamMs }
      if (held !== null) begun.givenBack = opts.guard!.finished(admission, held, snapshot.config, r)
      done(o)
    }
    const upstreamReq = send({
      host: url.hostname,
      port: url.port || (url.protocol === 'https:' ? 443 : 80),
      method,
      path: basePath + path + query,
      headers: upstreamRequestHeaders(req, { keepUpgrade: true, requestId: begun.requestId }),
      timeout: snapshot.config.upstream.timeoutMs,
    })
    upstreamReq.on('timeout', () =>
      upstreamReq.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }))
    )
    upstreamReq.on('error', (err: NodeJS.ErrnoException) => {
      const { status, text } = upstreamFailure(err)
      jsonFail(socket, status, text)
      end({ kind: 'upstream_error', status, upstreamMs: null, error: err.code ?? 'error' })
    })
    // The upstream declined the upgrade: relay its answer as is.
    upstreamReq.on('response', (res) => {
      socket.write(rawHead(res.statusCode ?? 502, res.statusMessage, res.rawHeaders))
      res.pipe(socket)
      end({
        kind: 'forwarded',
        status: res.statusCode ?? 0,
        upstreamMs: opts.clock.monotonic() - startedMs,
      })
    })
    upstreamReq.on('upgrade', (res, upstreamSocket, upstreamHead) => {
      const upstreamMs = opts.clock.monotonic() - startedMs
      upstreamReq.setTimeout(0)
      socket.write(rawHead(res.statusCode ?? 101, res.statusMessage, res.rawHeaders))
      joinTunnel({ socket, head }, { socket: upstreamSocket, head: upstreamHead }, tunnels)
      end({ kind: 'forwarded', status: 101, upstreamMs })
    })
    upstreamReq.end()
  }

  function handle(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    run(req, socket, head).catch((err: unknown) => {
      opts.logger.error({ err }, 'upgrade failed')
      socket.destroy()
    })
  }

  return { handle, tunnels }
}
