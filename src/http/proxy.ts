import type { Clock } from '../clock.js'
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import { Pool } from 'undici'
import { connectionTokens, HOP_BY_HOP } from '../request/hop-by-hop.js'
import { peerAddress } from '../request/client-ip.js'
import { sendJsonError } from './respond.js'
import { paced, TOO_SLOW, type BodyPace } from '../size/body-pace.js'
import { gatherStream } from '../size/chunk-gather.js'
import type { AnswerSpool } from './answer-spool.js'
import { AnswerRelay, type RelayEvents } from './answer-relay.js'
import { tooSlowMessage } from '../size/check.js'

// SPEC §6 forwarding: pooled keep-alive connections (undici Pool), bodies streamed both ways,
// hop-by-hop headers dropped, X-Forwarded-* appended; 502 when the upstream refuses or drops
// the connection, 504 when its headers do not come within upstream.timeout_ms.

export interface ForwardResult {
  /** The status the client got; 0 when the client went away first. */
  status: number
  /** From dispatch to the upstream's response headers; null when none came. */
  upstreamMs: number | null
  error?: string
  /** The answer's body bytes the client was sent (the upstream's, or our error's). */
  bytesOut: number
}

export interface ForwardRequest {
  req: IncomingMessage
  res: ServerResponse
  pathAndQuery: string
  /** Headers of ours to add to the answer (x-ratelimit-*, Deprecation, …). */
  extraHeaders: OutgoingHttpHeaders | null
  /** A body already read (size checks: iterable chunks keep the client's framing); else the request streams through. */
  readonly upload?: Buffer | Readable | Iterable<Buffer> | AsyncIterable<Buffer>
  /**
   * SPEC §4 min_body_rate (bytes/s; 0: none) for a body that still comes from the client as it
   * is sent on (the request itself, or what follows a held part): slower ends the call with 408.
   */
  minBodyRate?: number
  /** The body (given, or the request's) still comes from the client: min_body_rate holds it. */
  paced?: boolean
  /** upstream.timeout_ms of the snapshot the request was admitted under (reload applies at once). */
  timeoutMs: number
  /** SPEC §7: the request's id, sent upstream (in place of the client's) and answered. */
  requestId?: string
  /** Issue #25: the upstream call's span as W3C trace context (in place of the client's). */
  traceparent?: string
  /** The watch of a body read ahead (its rest keeps the average from its first byte). */
  pace?: BodyPace
  /**
   * SPEC §4 "Answers": where what the client does not take yet waits (memory, then a temporary
   * file, within the held-body bounds); absent: the answer streams at the client's pace.
   */
  holdAnswer?(): AnswerSpool | null
  /**
   * The server's part is over (its answer read whole): what the call held at the server (its
   * slot, its pool share, its key's place) may go, while the client still takes the answer.
   */
  onUpstreamDone?: (upstreamMs: number | null) => void
  done: (r: ForwardResult) => void
}

export interface Forwarder {
  forward(f: ForwardRequest): void
  /** Waits for the calls in flight, then closes the pool's connections. */
  close(): Promise<void>
  /** Closes every connection now; calls in flight fail. */
  destroy(): Promise<void>
}

export interface ForwarderOptions {
  url: string
  /** Upper bound on pooled connections to the upstream. */
  connections?: number
  /** Times each call to its response headers (SPEC §9 auto reads it); the system's by default. */
  clock: Clock
}

/** Request headers for the upstream, as a flat [name, value, …] list (keeps duplicates). */
export function upstreamRequestHeaders(
  req: IncomingMessage,
  opts: { keepUpgrade?: boolean; requestId?: string; traceparent?: string } = {}
): string[] {
  const keepUpgrade = opts.keepUpgrade === true
  const raw = req.rawHeaders
  const listed = connectionTokens(req.headers.connection)
  const out: string[] = []
  let xff: string | undefined
  let xfp: string | undefined
  let xfh: string | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    const value = raw[i + 1]!
    const lower = name.toLowerCase()
    if (keepUpgrade && (lower === 'connection' || lower === 'upgrade')) {
      out.push(name, value)
      continue
    }
    if (HOP_BY_HOP.has(lower) || (listed !== null && listed.has(lower))) continue
    if (opts.requestId !== undefined && lower === 'x-request-id') continue
    if (opts.traceparent !== undefined && lower === 'traceparent') continue
    if (lower === 'x-forwarded-for') xff = xff === undefined ? value : `${xff}, ${value}`
    else if (lower === 'x-forwarded-proto') xfp = xfp === undefined ? value : `${xfp}, ${value}`
    else if (lower === 'x-forwarded-host') xfh = xfh === undefined ? value : `${xfh}, ${value}`
    else out.push(name, value)
  }
  // Appended, never replaced: an untrusted client's list is kept, and our hop goes last.
  const peer = peerAddress(req.socket.remoteAddress)
  out.push('x-forwarded-for', xff === undefined ? peer : `${xff}, ${peer}`)
  const proto = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'
  out.push('x-forwarded-proto', xfp === undefined ? proto : `${xfp}, ${proto}`)
  const host = req.headers.host
  if (host !== undefined) out.push('x-forwarded-host', xfh === undefined ? host : `${xfh}, ${host}`)
  if (opts.requestId !== undefined) out.push('x-request-id', opts.requestId)
  if (opts.traceparent !== undefined) out.push('traceparent', opts.traceparent)
  return out
}

/** What clientResponseHeaders read of the answer on its way: the length its body will have. */
export interface AnswerSize {
  /** Its Content-Length, when it says one and no Transfer-Encoding; else -1. */
  wholeLength: number
}

/**
 * Response headers for the client as a flat [name, value, …] list: the upstream's raw headers
 * (names as sent, duplicates kept) less hop-by-hop ones, plus ours. No header object is built.
 * `size`, when given, gets the body's length as the headers say it (read in the same pass).
 */
export function clientResponseHeaders(
  raw: readonly (Buffer | string)[],
  extra: OutgoingHttpHeaders | null,
  requestId?: string,
  size?: AnswerSize
): string[] {
  const out: string[] = []
  let listed: Set<string> | null = null
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === 10 && raw[i]!.toString('latin1').toLowerCase() === 'connection') {
      listed = connectionTokens(raw[i + 1]!.toString('latin1'))
    }
  }
  let length = -1
  let chunked = false
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1')
    const lower = name.toLowerCase()
    if (lower === 'transfer-encoding') chunked = true
    if (HOP_BY_HOP.has(lower) || (listed !== null && listed.has(lower))) continue
    if (extra !== null && lower in extra) continue
    if (requestId !== undefined && lower === 'x-request-id') continue
    const value = raw[i + 1]!.toString('latin1')
    if (lower === 'content-length') length = /^\s*\d{1,15}\s*$/.test(value) ? Number(value) : -1
    out.push(name, value)
  }
  if (size !== undefined) size.wholeLength = chunked ? -1 : length
  if (requestId !== undefined) out.push('x-request-id', requestId)
  if (extra !== null) {
    for (const name in extra) {
      const v = extra[name]
      if (v === undefined) continue
      if (Array.isArray(v)) for (const x of v) out.push(name, x)
      else out.push(name, String(v))
    }
  }
  return out
}

/**
 * The largest answer held from its one chunk to its end, to go out with its headers as one
 * string: well under a socket's 16 KiB high-water mark, so a held answer is taken in as a
 * written one would have been (no relay either way).
 */
export const ONE_WRITE_MAX = 8 * 1024

function hasBody(req: IncomingMessage): boolean {
  const cl = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0')
}

/** What the client gets when forwarding fails: 504, 502, or a cut. */
function answerFailure(
  err: Error,
  f: ForwardRequest,
  upstreamMs: number | null,
  bytesSent: number,
  finish: (r: ForwardResult) => void
): void {
  const { req, res, extraHeaders, requestId } = f
  const code = (err as { code?: string }).code ?? err.name
  if (code === TOO_SLOW && !res.headersSent) {
    // SPEC §4: the rest of the body is left unread, so the connection closes with the answer.
    res.once('finish', () => req.socket.destroy())
    const message = tooSlowMessage(f.minBodyRate ?? 0)
    const bytesOut = sendJsonError(
      res,
      408,
      message,
      { ...extraHeaders, connection: 'close' },
      requestId
    )
    return finish({ status: 408, upstreamMs, error: code, bytesOut })
  }
  if (res.headersSent) {
    // The upstream dropped the connection mid-answer (or the client left): the client's
    // connection is closed too, so it cannot take a cut body for a whole one.
    res.destroy()
    const status = res.writableFinished ? res.statusCode : 0
    return finish({ status, upstreamMs, error: code, bytesOut: bytesSent })
  }
  if (req.destroyed && res.destroyed)
    return finish({ status: 0, upstreamMs, error: code, bytesOut: 0 })
  if (code === 'UND_ERR_HEADERS_TIMEOUT') {
    const message = `the upstream sent no answer within ${f.timeoutMs} ms`
    const bytesOut = sendJsonError(res, 504, message, extraHeaders, requestId)
    return finish({ status: 504, upstreamMs, error: code, bytesOut })
  }
  const message = `the upstream could not be reached (${code})`
  const bytesOut = sendJsonError(res, 502, message, extraHeaders, requestId)
  finish({ status: 502, upstreamMs, error: code, bytesOut })
}

/** The error of a forward whose client basegate cut (it took no byte of its answer in time). */
export const SEND_TIMEOUT = 'SEND_TIMEOUT'

function wentAway(): Error {
  return Object.assign(new Error('the client went away'), { code: 'ECONNRESET' })
}

/** What undici sends: the held body, or the request's own, paced where the client still sends it. */
function bodyOf(f: ForwardRequest, clock: Clock): ForwardRequest['upload'] | null {
  const upload = f.upload ?? (hasBody(f.req) ? f.req : null)
  // A body still arriving goes on in blocks (chunk-gather.ts); one held in memory already is.
  const source =
    upload !== null && Symbol.asyncIterator in upload
      ? gatherStream(upload as AsyncIterable<Buffer>)
      : upload
  const rate = f.minBodyRate ?? 0
  if (source === null || rate === 0 || f.paced !== true) return source
  const setTimer = (fn: () => void, ms: number) => {
    const t = clock.setTimer(fn, ms)
    return () => t.cancel()
  }
  return paced(source as AsyncIterable<Buffer>, rate, setTimer, () => clock.monotonic(), f.pace)
}

/**
 * One forwarded call, as undici's handler (its methods on the prototype: no closure per call).
 * The upstream's raw headers go to the client as they came (issue #14: no header object parsed
 * and rebuilt per call), its body as fast as the client takes it; a client that falls behind gets
 * an AnswerRelay (SPEC §4: what it has not taken waits in a spool, the server goes on), made
 * only then. The client leaving before the upstream finished stops the upstream call (a call
 * still waiting for a pooled connection is stopped at its connect, before a byte is sent).
 */
class Forwarding implements RelayEvents, AnswerSize {
  private readonly started: number
  private upstreamMs: number | null = null
  private resumeUpstream: () => void = noop
  private abortUpstream: ((err?: Error) => void) | null = null
  private finished = false
  private upstreamDone = false
  private bytes = 0
  /** The answer's Content-Length (-1: none said), from clientResponseHeaders. */
  wholeLength = -1
  /** A whole answer's one chunk, written with its headers at its end (see onData). */
  private held: Buffer | null = null
  private relay: AnswerRelay | null = null
  /** The client left before its answer was whole. */
  private gone = false

  constructor(
    private readonly f: ForwardRequest,
    private readonly clock: Clock
  ) {
    this.started = clock.monotonic()
    f.res.once('close', this.onClientClose)
  }

  private readonly onClientClose = (): void => {
    if (this.f.res.writableFinished) return
    this.gone = true
    if (!this.upstreamDone) this.abortUpstream?.(wentAway())
    // After the server's part, the client's leaving ends the call (nothing else would).
    else if (this.relay !== null && !this.relay.cut) this.gone_()
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortUpstream = abort
    if (this.gone || this.f.res.destroyed) abort(wentAway())
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true // 1xx: Node's server answers 100-continue itself
    const f = this.f
    this.upstreamMs = this.clock.monotonic() - this.started
    f.res.writeHead(
      statusCode,
      clientResponseHeaders(rawHeaders, f.extraHeaders, f.requestId, this)
    )
    this.resumeUpstream = resume
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.relay !== null) return this.relay.data(chunk)
    this.bytes += chunk.length
    // SPEC §12: a small answer that came whole in one chunk waits for its end, where it goes out
    // with the headers as one string (a Buffer goes as a second piece of a gathered write: the
    // header, the body, node's end; about 4 µs a call more). The parser reads no byte past a
    // Content-Length and ends the answer in the same parse: nothing comes between.
    if (
      chunk.length === this.wholeLength &&
      this.bytes === chunk.length &&
      chunk.length <= ONE_WRITE_MAX
    ) {
      this.held = chunk
      return true
    }
    if (this.f.res.write(chunk)) return true
    // SPEC §4: the client falls behind; from here what it has not taken waits in a spool.
    this.relay = new AnswerRelay(this.f.res, this.clock, this.f.timeoutMs, this.f, this)
    this.relay.bytes = this.bytes
    this.relay.behind()
    return true
  }

  onComplete(): void {
    this.upstreamDone = true
    // SPEC §4: the server's part is over (its connection goes back to the pool now).
    this.f.onUpstreamDone?.(this.upstreamMs)
    if (this.relay !== null) return this.relay.complete()
    const held = this.held
    if (held === null) this.f.res.end()
    else {
      this.held = null
      // latin1: every byte as one character, so the string is the body's bytes exactly.
      this.f.res.end(held.toString('latin1'), 'latin1')
    }
    this.finish({
      status: this.f.res.statusCode,
      upstreamMs: this.upstreamMs,
      bytesOut: this.bytes,
    })
  }

  onError(err: Error): void {
    const bytesOut = this.relay?.bytes ?? this.bytes
    answerFailure(err, this.f, this.upstreamMs, bytesOut, (r) => this.finish(r))
  }

  // RelayEvents: the relay's answer ended, the server may go on, the client left.
  ended(): void {
    const bytesOut = this.relay!.bytes
    this.finish({ status: this.f.res.statusCode, upstreamMs: this.upstreamMs, bytesOut })
  }

  resume(): void {
    this.resumeUpstream()
  }

  private gone_(): void {
    const bytesOut = this.relay!.taken
    this.finish({ status: 0, upstreamMs: this.upstreamMs, bytesOut, error: 'ECONNRESET' })
  }

  finish(r: ForwardResult): void {
    if (this.finished) return
    this.finished = true
    const relay = this.relay
    if (relay === null) return this.f.done(r)
    relay.close()
    // basegate cut the client: said as such (not as a leaver), with what it had taken.
    if (relay.cut)
      this.f.done({
        ...r,
        status: this.f.res.statusCode,
        error: SEND_TIMEOUT,
        bytesOut: relay.taken,
      })
    else this.f.done(r)
  }
}

const noop = (): void => {}

export function createForwarder(opts: ForwarderOptions): Forwarder {
  const url = new URL(opts.url)
  const basePath = url.pathname.replace(/\/+$/, '')
  const clock = opts.clock
  const pool = new Pool(url.origin, {
    connections: opts.connections ?? 256,
    pipelining: 1,
    keepAliveTimeout: 4_000,
  })

  function forward(f: ForwardRequest): void {
    const call = new Forwarding(f, clock)
    // The client left while its call was checked (its close came before the listener above).
    if (f.res.destroyed) return call.onError(wentAway())
    pool.dispatch(
      {
        path: basePath + f.pathAndQuery,
        method: f.req.method as 'GET',
        headers: upstreamRequestHeaders(f.req, {
          requestId: f.requestId,
          traceparent: f.traceparent,
        }),
        // undici writes any (async) iterable as the body; its types list only streams.
        body: bodyOf(f, clock) as Readable | null,
        // undici re-arms this timer on every body chunk it writes, so it runs from the request
        // fully sent to the response headers (SPEC §2 upstream.timeout_ms). Per request, so a
        // reload applies to the next one, as it does for WebSocket upgrades.
        headersTimeout: f.timeoutMs,
        // A stalled response body is cut after the same idle time.
        bodyTimeout: f.timeoutMs,
      },
      // undici's handler interface that receives the raw headers unparsed (a handler with
      // onResponseStart gets them parsed into an object first, by undici's UnwrapHandler).
      call
    )
  }

  return { forward, close: () => pool.close(), destroy: () => pool.destroy() }
}
