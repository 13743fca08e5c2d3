import { request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http'

export interface Answer {
  status: number
  headers: IncomingHttpHeaders
  rawHeaders: string[]
  body: string
}

/** One request with the path sent exactly as given (no URL normalisation on the way). */
export function send(
  port: number,
  opts: { method?: string; path: string; headers?: OutgoingHttpHeaders; body?: string | Buffer }
): Promise<Answer> {
  // Node's client sends a DELETE body with neither Content-Length nor chunked framing; real
  // clients declare the length, so this helper does too.
  const headers = { ...opts.headers }
  if (
    opts.body !== undefined &&
    headers['content-length'] === undefined &&
    headers['transfer-encoding'] === undefined
  ) {
    headers['content-length'] = Buffer.byteLength(opts.body)
  }
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: opts.method ?? 'GET',
        path: opts.path,
        headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            rawHeaders: res.rawHeaders,
            body: Buffer.concat(chunks).toString(),
          })
        )
        res.on('error', reject)
      }
    )
    req.on('error', reject)
    req.end(opts.body)
  })
}

export const UUID = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
export const rowsPath = (uuid = UUID) =>
  `/api-gateway/api/v2/dtables/${uuid}/rows/?table_name=Table1`

/** The answer to a GET, or null when none came within `ms`. */
export function answerWithin(port: number, path: string, ms: number): Promise<Answer | null> {
  return Promise.race([
    send(port, { path }),
    new Promise<null>((r) => setTimeout(() => r(null), ms)),
  ])
}
