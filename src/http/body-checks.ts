import type { IncomingMessage } from 'node:http'
import type { Readable } from 'node:stream'
import { historyOf, type GateDeps, type Pass } from './gate.js'
import { readJsonBody } from './read-body.js'

// The change-history entries recognised by a body field (SPEC §8), after the gate.

/**
 * SPEC §8 changes recognised by the body (Move Rows to Big Data without `view_name`): the
 * body is read (up to max_body_bytes) and forwarded as read; the entries it matches are
 * recorded for the upgrade report and returned for the log line. Null when the client left.
 */
export async function bodyHistory(
  deps: GateDeps,
  req: IncomingMessage,
  g: Pass
): Promise<{ body: Buffer | Readable; breaking: readonly string[] } | null> {
  const read = await readJsonBody(req, g.snapshot.config.sizeLimits.maxBodyBytes)
  if (read.kind === 'aborted') return null
  // Too large to look at: forwarded as it comes, unrecognised.
  if (read.kind === 'too_large') return { body: read.rest, breaking: [] }
  const json = read.json
  // Not a JSON object: the server judges it; the change is about a field of one.
  const isObject = json !== null && typeof json === 'object' && !Array.isArray(json)
  const lacking = isObject
    ? g.pendingHistory.filter((m) => !(m.bodyWithout! in json)).map((m) => m.entry)
    : []
  const h = historyOf(deps, g.snapshot, { method: req.method ?? 'GET', path: g.path }, lacking)
  const nowMs = (deps.now ?? Date.now)()
  for (const e of h.breaking) deps.recorder?.record(e.id, g.admission.classification.key, nowMs)
  return { body: read.body, breaking: h.breaking.map((e) => e.id) }
}
