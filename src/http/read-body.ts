import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'

export type BodyRead =
  | { kind: 'ok'; body: Buffer }
  /** Over the cap: what was read so far (the rest is still in the request stream). */
  | { kind: 'too_large'; chunks: Buffer[] }
  | { kind: 'aborted' }

/**
 * Reads a request body only up to `maxBytes` (SPEC §4 max_body_bytes). A declared length over
 * the cap is refused before reading a byte; a chunked body stops being read at the cap, so a
 * huge body never lands in memory.
 */
export function readBodyUpTo(req: IncomingMessage, maxBytes: number): Promise<BodyRead> {
  const declared = req.headers['content-length']
  if (declared !== undefined && Number(declared) > maxBytes)
    return Promise.resolve({ kind: 'too_large', chunks: [] })
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    const done = (r: BodyRead) => {
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('aborted', onError)
      resolve(r)
    }
    const onData = (c: Buffer) => {
      size += c.length
      chunks.push(c)
      if (size > maxBytes) {
        req.pause()
        done({ kind: 'too_large', chunks })
      }
    }
    const onEnd = () =>
      done({ kind: 'ok', body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) })
    const onError = () => done({ kind: 'aborted' })
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('aborted', onError)
  })
}

/** The body as it was received: what was read, then the rest of the stream (dry-run forwarding). */
export async function* replayThenRest(
  chunks: Buffer[],
  req: IncomingMessage
): AsyncGenerator<Buffer> {
  for (const c of chunks) yield c
  req.resume()
  for await (const c of req) yield c as Buffer
}

export type JsonBodyRead =
  | { kind: 'aborted' }
  /** Over the cap: the body as received, still streaming (what was read, then the rest). */
  | { kind: 'too_large'; rest: Readable }
  /** `json` is undefined when the body is not valid JSON. */
  | { kind: 'ok'; body: Buffer; json: unknown }

/** A small JSON body read whole (up to `maxBytes`) and parsed, kept byte for byte to forward. */
export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<JsonBodyRead> {
  const read = await readBodyUpTo(req, maxBytes)
  if (read.kind === 'aborted') return read
  if (read.kind === 'too_large') {
    return {
      kind: 'too_large',
      rest: Readable.from(replayThenRest(read.chunks, req), { objectMode: false }),
    }
  }
  let json: unknown
  try {
    json = JSON.parse(read.body.toString('utf8'))
  } catch {
    json = undefined
  }
  return { kind: 'ok', body: read.body, json }
}
