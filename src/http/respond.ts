import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Refusal } from './gate.js'

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

export function sendJsonError(
  res: ServerResponse,
  status: number,
  message: string,
  extra: OutgoingHttpHeaders | null = null
): void {
  const { headers, body } = jsonError(message, extra)
  res.writeHead(status, headers)
  res.end(body)
}

/** A refusal of the gate: a JSON error, or (SPEC §4) a 429 with no body. */
export function sendRefusal(res: ServerResponse, r: Refusal): void {
  if (r.message !== null) return sendJsonError(res, r.status, r.message, r.headers)
  // A 429's headers come complete from the admission (content-length 0 included): no copy
  // per refusal, which cost a measurable share of a flood's CPU (bench flood row).
  res.writeHead(r.status, r.headers ?? { 'content-length': 0 })
  res.end()
}
