import { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import { Duplex, Writable } from 'node:stream'
import { createGateway, type GatewayDeps } from '../../src/app.js'
import { parseConfig } from '../../src/config/load.js'
import { compileSnapshot } from '../../src/http/snapshot.js'
import type { ForwardRequest, Forwarder } from '../../src/http/proxy.js'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { createLogger } from '../../src/observe/log.js'
import { Metrics } from '../../src/observe/metrics.js'
import { FakeClock } from './clock.js'

// createGateway in process (issue #42): the memory store, the fake clock, a stub forwarder and a
// logger writing into an array. A request is a real IncomingMessage on an unconnected socket, its
// answer a real ServerResponse: the gateway's own code runs, nothing else does, and every timer
// (queue_ms, delay_ms, body_timeout_ms, min_body_rate) is the test's to move.

/** What the stub server answers a forwarded call: a status, or a failure to reach it. */
export interface StubAnswer {
  status: number
  error?: string
}

/** A forwarded call the stub holds until the test answers it (slots, queues, key shares). */
export interface HeldCall {
  f: ForwardRequest
  answer(status?: number): void
}

export interface Answer {
  status?: number
  headers?: Record<string, unknown>
  body: string
  /** Answered before handleRequest returned: no promise, no event-loop turn (issue #26). */
  sync?: boolean
}

export interface CallOptions {
  headers?: Record<string, string>
  /** Raw header pairs beyond `headers` (a duplicate Host, a second Content-Type). */
  extraRaw?: string[]
  /** The whole body, sent at once; without it (and without `open`) the body is empty. */
  body?: string | Buffer
  /** The body is the test's to send: `push` chunks and `end` it (SPEC §4's slow clients). */
  open?: boolean
  /** The client's address (the socket's peer). */
  remote?: string
}

export interface Pending {
  answer: Promise<Answer>
  push(chunk: string | Buffer): void
  end(): void
  /** The client goes away. */
  leave(): void
}

export const BASE = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

const tick = () => new Promise<void>((r) => setImmediate(r))

export function inProcess(
  yaml: string,
  opts: {
    /** 'hold' keeps the call at the server until the test answers it (see `held`). */
    upstream?: (f: ForwardRequest) => StubAnswer | 'hold'
    clock?: FakeClock
    store?: GatewayDeps['store']
    deps?: Partial<GatewayDeps>
  } = {}
) {
  const r = parseConfig(yaml, {})
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  const snap = compileSnapshot(r.config)
  const lines: Record<string, unknown>[] = []
  const sink = new Writable({
    write(chunk, _e, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l))
      cb()
    },
  })
  const logger = createLogger({ level: 'debug', destination: sink })
  const forwarded: ForwardRequest[] = []
  const held: HeldCall[] = []
  const upstream = opts.upstream ?? (() => ({ status: 200 }))
  const reply = (f: ForwardRequest, a: StubAnswer) => {
    if (f.res.destroyed) return
    for (const [k, v] of Object.entries(f.extraHeaders ?? {})) f.res.setHeader(k, v as string)
    if (!a.error) f.res.writeHead(a.status).end('{}')
    else f.res.writeHead(502).end()
    f.done({ status: a.status, upstreamMs: 1, error: a.error, bytesOut: a.error ? 0 : 2 })
  }
  const forwarder: Forwarder = {
    forward(f) {
      forwarded.push(f)
      const a = upstream(f)
      if (a === 'hold') held.push({ f, answer: (status = 200) => reply(f, { status }) })
      else reply(f, a)
    },
    close: async () => {},
    destroy: async () => {},
  }
  const clock = opts.clock ?? new FakeClock(Date.parse('2026-11-23T10:00:00Z'))
  const metrics = new Metrics()
  const store = opts.store ?? new MemoryStore()
  const gw = createGateway({
    snapshot: () => snap,
    store,
    forwarder,
    logger,
    upstreamUrl: 'http://127.0.0.1:1',
    metrics,
    clock,
    ...opts.deps,
  })

  function start(method: string, url: string, o: CallOptions = {}): Pending {
    const socket = new Socket()
    Object.defineProperty(socket, 'remoteAddress', { value: o.remote ?? '10.0.0.1' })
    const req = new IncomingMessage(socket)
    req.method = method
    req.url = url
    const headers: Record<string, string> = { host: 'gw', ...o.headers }
    if (o.body !== undefined && headers['content-length'] === undefined)
      headers['content-length'] = String(Buffer.byteLength(o.body))
    req.headers = headers
    req.rawHeaders = [...(Object.entries(headers).flat() as string[]), ...(o.extraRaw ?? [])]
    const res = new ServerResponse(req)
    const out: Answer = { body: '' }
    let returned = false
    let written: Record<string, unknown> = {}
    const origHead = res.writeHead.bind(res)
    res.writeHead = ((status: number, h?: Record<string, unknown>) => {
      written = { ...res.getHeaders(), ...h }
      return origHead(status, h as never)
    }) as typeof res.writeHead
    const answer = new Promise<Answer>((resolve) => {
      const origEnd = res.end.bind(res)
      res.end = ((chunk?: unknown) => {
        out.status = res.statusCode
        out.sync = !returned
        out.headers = { ...res.getHeaders(), ...written }
        if (typeof chunk === 'string') out.body = chunk
        else if (Buffer.isBuffer(chunk)) out.body = chunk.toString()
        // The request line is written on the response's end: one turn later it is in `lines`.
        void tick().then(() => resolve(out))
        return origEnd()
      }) as typeof res.end
      // A client that leaves gets no answer; what it held is freed all the same.
      res.once('close', () => void tick().then(() => resolve(out)))
    })
    // As Node's parser does at a body's end: an IncomingMessage destroyed before it is
    // complete says 'aborted' (a client gone mid-body).
    const finish = () => {
      req.complete = true
      req.push(null)
    }
    if (o.body !== undefined) {
      req.push(typeof o.body === 'string' ? Buffer.from(o.body) : o.body)
      finish()
    } else if (o.open !== true) finish()
    gw.handleRequest(req, res)
    returned = true
    return {
      answer,
      push: (chunk) => void req.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk),
      end: finish,
      leave: () => {
        req.destroy()
        res.destroy()
      },
    }
  }

  const call = (method: string, url: string, o: CallOptions = {}) => start(method, url, o).answer

  /**
   * An Upgrade request (SPEC §4, §6) on a raw socket of the test's: what the gateway writes to
   * it is read back as an answer (status, headers, body) once the gateway ends it.
   */
  function upgrade(url: string, o: CallOptions = {}): Promise<Answer & { raw: string }> {
    const written: Buffer[] = []
    const socket = new Duplex({
      read() {},
      write(chunk: Buffer, _e, cb) {
        written.push(chunk)
        cb()
      },
    })
    Object.defineProperty(socket, 'remoteAddress', { value: o.remote ?? '10.0.0.1' })
    const req = new IncomingMessage(socket as unknown as Socket)
    req.method = 'GET'
    req.url = url
    const headers: Record<string, string> = {
      host: 'gw',
      connection: 'Upgrade',
      upgrade: 'websocket',
      ...o.headers,
    }
    req.headers = headers
    req.rawHeaders = [...(Object.entries(headers).flat() as string[]), ...(o.extraRaw ?? [])]
    req.complete = true
    const answer = new Promise<Answer & { raw: string }>((resolve) => {
      const done = () =>
        void tick().then(() => {
          const raw = Buffer.concat(written).toString()
          const [head = '', body = ''] = raw.split('\r\n\r\n')
          const [status, ...fields] = head.split('\r\n')
          const h: Record<string, string> = {}
          for (const f of fields) {
            const at = f.indexOf(':')
            h[f.slice(0, at).toLowerCase()] = f.slice(at + 1).trim()
          }
          resolve({ status: Number(status!.split(' ')[1]), headers: h, body, raw })
        })
      socket.once('finish', done)
      socket.once('close', done)
    })
    gw.handleUpgrade(req, socket, Buffer.alloc(0))
    return answer
  }

  /** Request lines (a call's one line each; start-up lines have no method). */
  const requestLines = () => lines.filter((l) => typeof l.method === 'string')

  return {
    gw,
    call,
    start,
    upgrade,
    lines,
    requestLines,
    forwarded,
    held,
    metrics,
    clock,
    store,
    tick,
  }
}

export type InProcess = ReturnType<typeof inProcess>
