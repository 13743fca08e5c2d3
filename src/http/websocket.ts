import { request as httpRequest, STATUS_CODES, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { Duplex } from 'node:stream'
import type { Logger } from '../observe/log.js'
import type { Snapshot } from '../config/snapshot.js'
import type { Admission } from './rate-limit.js'
import { upstreamRequestHeaders } from './proxy.js'

// SPEC §6: WebSocket upgrades (the service's /socket.io/ real-time socket) pass through.
// The upgrade request is rate-checked like any other; after the 101 the two sockets are
// piped to each other. Tunnels bypass the pool: each holds its own upstream connection.

type Check = (
  req: IncomingMessage,
  fail: (status: number, message: string, headers?: Record<string, number>) => void
) => Promise<{ adm: Admission; path: string; query: string; snap: Snapshot } | null>

type LogLine = (
  method: string,
  path: string,
  adm: Admission,
  status: number,
  started: number,
  upstreamMs: number | null,
  extra?: Record<string, unknown>
) => void

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

function jsonFail(socket: Duplex) {
  return (status: number, message: string, extra?: Record<string, number>) => {
    const body = JSON.stringify({ error_msg: message })
    writeRaw(
      socket,
      status,
      {
        ...extra,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        connection: 'close',
      },
      body
    )
  }
}

export function createUpgradeHandler(opts: {
  upstreamUrl: string
  logger: Logger
  check: Check
  logLine: LogLine
}) {
  const url = new URL(opts.upstreamUrl)
  const basePath = url.pathname.replace(/\/+$/, '')
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  const tunnels = new Set<Duplex>()

  async function run(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const started = performance.now()
    const method = req.method ?? 'GET'
    socket.on('error', () => socket.destroy())
    const checked = await opts.check(req, jsonFail(socket))
    if (checked === null) return
    const { adm, path, query, snap } = checked
    if (adm.overLimit && snap.config.mode === 'enforce') {
      writeRaw(socket, 429, {
        ...(adm.headers as Record<string, number>),
        'content-length': 0,
        connection: 'close',
      })
      opts.logLine(method, path, adm, 429, started, null)
      return
    }

    const upstreamReq = send({
      host: url.hostname,
      port: url.port || (url.protocol === 'https:' ? 443 : 80),
      method,
      path: basePath + path + query,
      headers: upstreamRequestHeaders(req, true),
      timeout: snap.config.upstream.timeoutMs,
    })
    upstreamReq.on('timeout', () =>
      upstreamReq.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }))
    )
    upstreamReq.on('error', (err: NodeJS.ErrnoException) => {
      const status = err.code === 'ETIMEDOUT' ? 504 : 502
      jsonFail(socket)(
        status,
        status === 504
          ? 'the upstream sent no answer in time'
          : `the upstream could not be reached (${err.code ?? 'error'})`
      )
      opts.logLine(method, path, adm, status, started, null, { upstream_error: err.code })
    })
    // The upstream declined the upgrade: relay its answer as is.
    upstreamReq.on('response', (res) => {
      socket.write(rawHead(res.statusCode ?? 502, res.statusMessage, res.rawHeaders))
      res.pipe(socket)
      opts.logLine(method, path, adm, res.statusCode ?? 0, started, performance.now() - started)
    })
    upstreamReq.on('upgrade', (res, upstreamSocket, upstreamHead) => {
      const upstreamMs = performance.now() - started
      upstreamReq.setTimeout(0)
      socket.write(rawHead(res.statusCode ?? 101, res.statusMessage, res.rawHeaders))
      if (upstreamHead.length > 0) socket.write(upstreamHead)
      if (head.length > 0) upstreamSocket.write(head)
      upstreamSocket.on('error', () => socket.destroy())
      socket.on('close', () => upstreamSocket.destroy())
      upstreamSocket.on('close', () => socket.destroy())
      upstreamSocket.pipe(socket)
      socket.pipe(upstreamSocket)
      tunnels.add(socket)
      socket.once('close', () => tunnels.delete(socket))
      opts.logLine(
        method,
        path,
        adm,
        101,
        started,
        upstreamMs,
        adm.overLimit ? { dry_run: true } : undefined
      )
    })
    upstreamReq.end()
  }

  function handle(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    run(req, socket, head).catch((err: unknown) => {
      opts.logger.error({ err: { message: (err as Error)?.message } }, 'upgrade failed')
      socket.destroy()
    })
  }

  return { handle, tunnels }
}
