import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'

/** SPEC §4 error answers: `{"error_msg": "..."}` with a content-type and a length. */
export function sendJsonError(
  res: ServerResponse,
  status: number,
  message: string,
  extra: OutgoingHttpHeaders | null = null
): void {
  const body = JSON.stringify({ error_msg: message })
  const headers: OutgoingHttpHeaders = {
    ...extra,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  }
  res.writeHead(status, headers)
  res.end(body)
}

/** SPEC §4: a 429 has no body. */
export function sendTooMany(res: ServerResponse, headers: OutgoingHttpHeaders): void {
  headers['content-length'] = 0
  res.writeHead(429, headers)
  res.end()
}
