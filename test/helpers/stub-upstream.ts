import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll } from 'vitest'

// A stand-in for the service's server (SERVICE.md shapes), on a free loopback port.

export interface SeenRequest {
  method: string
  url: string
  headers: IncomingHttpHeaders
  rawHeaders: string[]
  bytes: number
}

export interface StubUpstream {
  url: string
  port: number
  server: Server
  seen: SeenRequest[]
  /** Replace the default answer for the next requests. */
  handle(fn: ((req: IncomingMessage, res: ServerResponse) => void) | null): void
  close(): Promise<void>
}

function defaultAnswer(req: IncomingMessage, res: ServerResponse, bytes: number): void {
  const path = (req.url ?? '/').split('?')[0]!
  let body: unknown
  if (/\/api2\/ping\/?$/.test(path)) body = 'pong'
  else if (/\/api-gateway\/api\/v2\/ping\/?$/.test(path)) body = { ret: 'pong' }
  else if (/\/server-info\/?$/.test(path))
    body = { version: '6.2.0', edition: 'enterprise edition' }
  else if (/\/rows\/?$/.test(path)) body = { rows: [], method: req.method, bytes }
  else body = { ok: true, method: req.method, bytes }
  const text = JSON.stringify(body)
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  })
  res.end(text)
}

export async function startStubUpstream(): Promise<StubUpstream> {
  const seen: SeenRequest[] = []
  let custom: ((req: IncomingMessage, res: ServerResponse) => void) | null = null
  const server = createServer((req, res) => {
    if (custom) {
      seen.push({
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        bytes: -1,
      })
      return custom(req, res)
    }
    let bytes = 0
    req.on('data', (c: Buffer) => (bytes += c.length))
    req.on('end', () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        bytes,
      })
      defaultAnswer(req, res, bytes)
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    seen,
    handle: (fn) => (custom = fn),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

/**
 * A stub upstream for one test file: started before its tests, closed after them. Call at
 * the top level of the file; use it from inside tests.
 */
export function useStubUpstream(): StubUpstream {
  let up: StubUpstream | undefined
  beforeAll(async () => {
    up = await startStubUpstream()
  })
  afterAll(async () => {
    await up?.close()
  })
  const get = (): StubUpstream => {
    if (up === undefined)
      throw new Error('the stub upstream starts in beforeAll; use it inside a test')
    return up
  }
  return {
    get url() {
      return get().url
    },
    get port() {
      return get().port
    },
    get server() {
      return get().server
    },
    get seen() {
      return get().seen
    },
    handle: (fn) => get().handle(fn),
    close: () => get().close(),
  }
}

/** A handler that keeps the exact bytes of each body it received, then answers `{"success":true}`. */
export function recordBodies(
  onBody: (url: string, body: Buffer) => void
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      onBody(req.url!, Buffer.concat(chunks))
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"success":true}')
    })
  }
}
