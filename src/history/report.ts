import type { HistoryIndex } from './match.js'
import type { ReportStore } from './report-store.js'
import { compareVersions } from './version.js'
import { shownKey } from '../request/base-uuid.js'

// SPEC §8's upgrade report, for the admin API and the `upgrade-report` command alike.

/** The upgrade report from one version to another (SPEC §8), busiest first. */
export async function upgradeReport(
  index: HistoryIndex,
  report: ReportStore,
  from: string | null,
  to: string,
  nowMs: number
) {
  const entries = index.entries.filter(
    (e) =>
      e.kind !== 'deprecated' &&
      compareVersions(e.version, to) <= 0 &&
      (from === null || compareVersions(e.version, from) > 0)
  )
  const usage = await report.read(
    entries.map((e) => e.id),
    nowMs
  )
  const rows = entries.map((e) => {
    const u = usage.get(e.id)!
    return {
      id: e.id,
      version: e.version,
      date: index.releaseDate(e.version),
      what: e.what,
      replacement: e.replacement,
      calls: u.calls,
      last_seen: u.lastSeenMs === null ? null : new Date(u.lastSeenMs).toISOString(),
      top_keys: u.topKeys.map((k) => ({ ...k, key: shownKey(k.key) })), // SPEC §7
    }
  })
  rows.sort((a, b) => b.calls - a.calls || compareVersions(a.version, b.version))
  return { from, to, entries: rows }
}

/**
 * Issue #25: a version past the newest release the history knows is not an all-clear: nothing
 * is known about what it breaks. The reason to give, or null for a known version.
 */
export function beyondHistory(index: HistoryIndex, to: string): string | null {
  const newest = index.releases[0]?.version
  if (newest === undefined || compareVersions(to, newest) <= 0) return null
  return `${to} is past ${newest}, the newest release in basegate's change history: what it breaks is not known (a newer basegate may know)`
}
