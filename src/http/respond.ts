import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Refusal } from './call.js'

/** SPEC §4 error answers: `{"error_msg": "..."}` with a content-type and a length. */
export function jsonError(
  message: string,
  extra: OutgoingHttpHeaders | null = null
): { headers: OutgoingHttpHeaders; body: string } {
  const body = JSON.stringify({ error_msg: message })
  const headers: OutgoingHttpHeaders = {
    ...extra,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  }
  return { headers, body }
}

/** Writes the error answer; returns its body's bytes (the access log's bytes_out). */
export function sendJsonError(
  res: ServerResponse,
  status: number,
  message: string,
  extra: OutgoingHttpHeaders | null = null,
  requestId?: string
): number {
  const { headers, body } = jsonError(message, extra)
  if (requestId !== undefined) headers['x-request-id'] = requestId
  res.writeHead(status, headers)
  res.end(body)
  return headers['content-length'] as number
}

/** A refusal of the gate: a JSON error, or (SPEC §4) a 429 with no body; returns the body's bytes. */
export function sendRefusal(res: ServerResponse, r: Refusal, requestId?: string): number {
  if (r.message !== null) return sendJsonError(res, r.status, r.message, r.headers, requestId)
  // A 429's headers come complete from the admission (content-length 0 included), an object of
  // this call's own: completed in place, no copy per refusal (a flood's CPU, bench flood row).
  const headers = r.headers ?? { 'content-length': 0 }
  if (requestId !== undefined) headers['x-request-id'] = requestId
  res.writeHead(r.status, headers)
  res.end()
  return 0
}
