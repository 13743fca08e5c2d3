import { createServer, request, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { systemClock } from '../../src/clock.js'
import {
  clientResponseHeaders,
  createForwarder,
  ONE_WRITE_MAX,
  type ForwardResult,
} from '../../src/http/proxy.js'

// SPEC §12: a small answer that came whole goes to the client with its headers as one string
// (one piece of the socket's write, not the header, the body and node's end as three), and
// every other answer as before; the bytes the client gets are the server's either way.

/** Every byte value, and then some: latin1 must carry them exactly. */
const BINARY = Buffer.from(Array.from({ length: 700 }, (_, i) => (i * 37) % 256))

/**
 * The rest of a streamed answer, which the server holds back until the client has read its
 * first part (no clock in the test: a part held by the gateway would never reach the client
 * on its own, so after 2 s the rest goes anyway and the test sees who let it go).
 */
let sendRest: (() => void) | null = null
let restTimer: NodeJS.Timeout | undefined
let restSentBy: 'client' | 'timeout' | null = null

function holdRest(send: () => void): void {
  sendRest = send
  restSentBy = null
  restTimer = setTimeout(() => release('timeout'), 2_000)
}

function release(by: 'client' | 'timeout'): void {
  const send = sendRest
  if (send === null) return
  clearTimeout(restTimer)
  sendRest = null
  restSentBy = by
  send()
}

/** The server's answers by path: a body, and whether it says its length. */
function upstreamAnswer(path: string, res: ServerResponse): void {
  const sized = (body: Buffer) => {
    res.writeHead(200, {
      'content-type': 'application/octet-stream',
      'content-length': body.length,
    })
    res.end(body)
  }
  if (path === '/small') return sized(BINARY)
  if (path === '/large') return sized(Buffer.alloc(ONE_WRITE_MAX + 1, 0xe9))
  if (path === '/chunked') {
    res.writeHead(200, { 'content-type': 'application/octet-stream' })
    res.write(BINARY.subarray(0, 300))
    return holdRest(() => res.end(BINARY.subarray(300)))
  }
  if (path === '/slow-second-part') {
    // Says its length, sends a part, then the rest later: the part must not wait for the rest.
    res.writeHead(200, { 'content-length': BINARY.length })
    res.write(BINARY.subarray(0, 100))
    return holdRest(() => res.end(BINARY.subarray(100)))
  }
  if (path === '/empty') {
    res.writeHead(204)
    return void res.end()
  }
  res.writeHead(404, { 'content-length': 0 })
  res.end()
}

interface Seen {
  /** What the gateway's socket was handed, in order: strings or Buffers. */
  writes: (string | Buffer)[]
  result: ForwardResult
}

let upstream: Server
let front: Server
const seen: Seen[] = []

beforeAll(async () => {
  upstream = createServer((req, res) => upstreamAnswer(req.url ?? '', res))
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
  const forwarder = createForwarder({
    url: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
    clock: systemClock,
  })
  front = createServer((req, res) => {
    const s: Seen = { writes: [], result: { status: -1, upstreamMs: null, bytesOut: -1 } }
    seen.push(s)
    const socket = res.socket as Socket
    const write = socket.write
    socket.write = function (this: Socket, chunk: string | Buffer, ...rest: never[]) {
      s.writes.push(chunk)
      return write.call(this, chunk, ...rest)
    } as Socket['write']
    forwarder.forward({
      req,
      res,
      pathAndQuery: req.url ?? '/',
      extraHeaders: { 'x-ratelimit-limit': '10' },
      timeoutMs: 5_000,
      done: (r) => {
        socket.write = write
        s.result = r
      },
    })
  })
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r))
})

afterAll(async () => {
  front.closeAllConnections()
  upstream.closeAllConnections()
  await new Promise((r) => front.close(r))
  await new Promise((r) => upstream.close(r))
})

/** A call through the front server: its status and its body's bytes; the server's held rest goes once the first bytes are read. */
function get(path: string, method = 'GET') {
  return new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
    const port = (front.address() as AddressInfo).port
    request({ host: '127.0.0.1', port, path, method, agent: false }, (res) => {
      const parts: Buffer[] = []
      res.on('data', (c: Buffer) => {
        parts.push(c)
        release('client')
      })
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(parts) }))
    })
      .on('error', reject)
      .end()
  })
}

/** The writes of the last call through the front server, as text (latin1: byte for byte). */
const lastWrites = () =>
  seen.at(-1)!.writes.map((w) => (typeof w === 'string' ? w : w.toString('latin1')))

describe('forwarding an answer (SPEC §6, §12)', () => {
  it('a small answer that came whole: its headers and body in one string, every byte kept', async () => {
    const a = await get('/small')
    expect(a.status).toBe(200)
    expect(a.body.equals(BINARY)).toBe(true)
    const writes = seen.at(-1)!.writes
    // The first piece is the whole answer: the status line, our header, and the body.
    expect(typeof writes[0]).toBe('string')
    const first = writes[0] as string
    expect(first.startsWith('HTTP/1.1 200')).toBe(true)
    expect(first).toContain('x-ratelimit-limit: 10')
    expect(first.endsWith(BINARY.toString('latin1'))).toBe(true)
    expect(writes.slice(1).join('')).toBe('') // at most node's empty end
    expect(seen.at(-1)!.result).toMatchObject({ status: 200, bytesOut: BINARY.length })
  })

  it('a larger answer goes as before: the headers, then the body as the server sent it', async () => {
    const a = await get('/large')
    expect(a.body.equals(Buffer.alloc(ONE_WRITE_MAX + 1, 0xe9))).toBe(true)
    const writes = lastWrites()
    expect(writes[0]!.startsWith('HTTP/1.1 200')).toBe(true)
    expect(writes[0]!.endsWith('\r\n\r\n')).toBe(true)
    expect(seen.at(-1)!.result.bytesOut).toBe(ONE_WRITE_MAX + 1)
  })

  it('an answer without a length streams: its first part reaches the client before the rest is sent', async () => {
    const a = await get('/chunked')
    expect(a.body.equals(BINARY)).toBe(true)
    expect(restSentBy).toBe('client')
    expect(seen.at(-1)!.result.bytesOut).toBe(BINARY.length)
  })

  it('a part of a sized answer is not held for the rest', async () => {
    const a = await get('/slow-second-part')
    expect(a.body.equals(BINARY)).toBe(true)
    // The first 100 bytes reached the client while the server still held the rest.
    expect(restSentBy).toBe('client')
    expect(seen.at(-1)!.result.bytesOut).toBe(BINARY.length)
  })

  it("a HEAD's answer says a length and sends no body: nothing is held, nothing sent", async () => {
    const a = await get('/small', 'HEAD')
    expect([a.status, a.body.length]).toEqual([200, 0])
    expect(lastWrites().join('').toLowerCase()).toContain(`content-length: ${BINARY.length}\r\n`)
    expect(lastWrites().join('')).not.toContain(BINARY.subarray(0, 50).toString('latin1'))
    expect(seen.at(-1)!.result).toMatchObject({ status: 200, bytesOut: 0 })
  })

  it('an answer with no body ends as before', async () => {
    const a = await get('/empty')
    expect([a.status, a.body.length]).toEqual([204, 0])
    expect(seen.at(-1)!.result).toMatchObject({ status: 204, bytesOut: 0 })
  })
})

describe("the answer's length, read with its headers", () => {
  /** What clientResponseHeaders says of the body's length. */
  const answerLength = (raw: Buffer[]) => {
    const size = { wholeLength: -2 }
    clientResponseHeaders(raw, null, undefined, size)
    return size.wholeLength
  }

  it("reads the server's Content-Length, whatever its case, and nothing else", () => {
    const raw = (...xs: string[]) => xs.map((x) => Buffer.from(x))
    expect(answerLength(raw('Content-Type', 'x', 'Content-Length', '42'))).toBe(42)
    expect(answerLength(raw('content-length', ' 7 '))).toBe(7)
    expect(answerLength(raw('Content-Type', 'x'))).toBe(-1)
    expect(answerLength(raw('Content-Length', '4x'))).toBe(-1)
    expect(answerLength(raw('Content-Length', '-1'))).toBe(-1)
    expect(answerLength(raw('x-content-length', '9'))).toBe(-1)
    // A length beside a Transfer-Encoding is not the body's (the parser goes by the encoding).
    expect(answerLength(raw('Content-Length', '9', 'Transfer-Encoding', 'chunked'))).toBe(-1)
    expect(answerLength(raw('transfer-encoding', 'chunked', 'Content-Length', '9'))).toBe(-1)
  })
})
