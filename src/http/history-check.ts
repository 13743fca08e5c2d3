import type { IncomingMessage } from 'node:http'
import type { Readable } from 'node:stream'
import type { Snapshot } from './snapshot.js'
import { decide, HISTORY, NO_HISTORY, type HistoryDecision } from '../history/match.js'
import type { HistoryEntry } from '../history/table.js'
import { baseUuidOfPath } from '../request/base-uuid.js'
import { readJsonBody } from './read-body.js'
import type { GateDeps, Pass } from './call.js'

// SPEC §8 on one admitted call, in one place for the gate (method, path, query) and for the
// entries a body field decides (Move Rows to Big Data without `view_name`): what the server's
// version makes of the matched entries, and the upgrade report's count of those that break.

/** Decides the matched entries on this server, and records the breaking ones for the report. */
export function checkHistory(
  deps: GateDeps,
  snapshot: Snapshot,
  req: { method: string; path: string; key: string },
  entries: readonly HistoryEntry[]
): HistoryDecision {
  if (entries.length === 0) return NO_HISTORY
  const { removed, deprecationHeaders } = snapshot.config.history
  const uuid = baseUuidOfPath(req.path)
  const server = deps.serverVersion?.() ?? null
  const h = decide(HISTORY, entries, server, { removed, deprecationHeaders }, { ...req, uuid })
  if (h.breaking.length > 0 && deps.recorder !== undefined) {
    const nowMs = (deps.now ?? Date.now)()
    for (const e of h.breaking) deps.recorder.record(e.id, req.key, nowMs)
  }
  return h
}

/**
 * The entries that depend on the body: it is read (up to max_body_bytes) and forwarded as
 * read; what it matches joins the call's `apiChanges`. Null when the client left.
 */
export async function bodyHistory(
  deps: GateDeps,
  req: IncomingMessage,
  g: Pass
): Promise<{ body: Buffer | Readable } | null> {
  const read = await readJsonBody(req, g.snapshot.config.sizeLimits.maxBodyBytes)
  if (read.kind === 'aborted') return null
  // Too large to look at: forwarded as it comes, unrecognised.
  if (read.kind === 'too_large') return { body: read.rest }
  const json = read.json
  // Not a JSON object: the server judges it; the change is about a field of one.
  const isObject = json !== null && typeof json === 'object' && !Array.isArray(json)
  const lacking = isObject
    ? g.pendingHistory.filter((m) => !(m.bodyWithout! in json)).map((m) => m.entry)
    : []
  const key = g.admission.classification.key
  const h = checkHistory(
    deps,
    g.snapshot,
    { method: req.method ?? 'GET', path: g.route, key },
    lacking
  )
  for (const e of h.breaking) g.apiChanges.push(e.id)
  return { body: read.body }
}
