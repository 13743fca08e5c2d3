import type { Snapshot } from './snapshot.js'
import { decide, HISTORY, NO_HISTORY, type HistoryDecision } from '../history/match.js'
import type { HistoryEntry } from '../history/table.js'
import { baseUuidOfPath } from '../request/base-uuid.js'
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
    const nowMs = deps.clock.now()
    for (const e of h.breaking) deps.recorder.record(e.id, req.key, nowMs)
  }
  return h
}

/**
 * The entries that depend on the body (SPEC §8: Move Rows to Big Data without `view_name`), once
 * the body step read which of their fields it names: the ids of those the body matches (the line
 * adds them to the gate's). A body that is not a JSON object (`named` null) matches none: the
 * server judges it.
 */
export function bodyHistory(
  deps: GateDeps,
  g: Pass,
  method: string,
  named: ReadonlySet<string> | null
): readonly string[] {
  if (named === null) return []
  const lacking = g.pendingHistory.filter((m) => !named.has(m.bodyWithout!)).map((m) => m.entry)
  const key = g.admission.classification.key
  const h = checkHistory(deps, g.snapshot, { method, path: g.route, key }, lacking)
  return h.breaking.map((e) => e.id)
}

/** The fields the entries pending on a call's body ask about. */
export function pendingFields(g: Pass): readonly string[] | undefined {
  if (g.pendingHistory.length === 0) return undefined
  return [...new Set(g.pendingHistory.map((m) => m.bodyWithout!))]
}
