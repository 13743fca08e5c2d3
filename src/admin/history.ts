import type { Hono } from 'hono'
import { HISTORY } from '../history/match.js'
import type { HistoryIndex } from '../history/match.js'
import type { ReportStore } from '../history/report-store.js'
import { beyondHistory, upgradeReport } from '../history/report.js'
import { parseVersion } from '../history/version.js'

export interface HistoryDeps {
  serverVersion: () => string | null
  report: ReportStore
  /** Writes this instance's pending counts first, so the report includes them. */
  flush: () => Promise<void>
  now: () => number
}

/** GET /v1/history: every release, newest first, with the server's version. */
export function historyJson(index: HistoryIndex, server: string | null) {
  return {
    server_version: server,
    versions: index.releases.map((r) => ({
      version: r.version,
      date: r.date,
      breaking: r.breaking,
      changes: r.changes,
    })),
  }
}

export function historyRoutes(app: Hono, deps: HistoryDeps): void {
  app.get('/v1/history', (c) => c.json(historyJson(HISTORY, deps.serverVersion())))
  app.get('/v1/upgrade-report', async (c) => {
    const to = parseVersion(c.req.query('to') ?? '')
    if (to === null) return c.json({ error_msg: 'give the version to upgrade to: ?to=6.2' }, 400)
    const beyond = beyondHistory(HISTORY, to)
    if (beyond !== null) return c.json({ error_msg: beyond }, 400)
    const fromText = c.req.query('from')
    const from = fromText === undefined ? deps.serverVersion() : parseVersion(fromText)
    if (fromText !== undefined && from === null)
      return c.json({ error_msg: `from=${JSON.stringify(fromText)} is not a version` }, 400)
    await deps.flush()
    return c.json(await upgradeReport(HISTORY, deps.report, from, to, deps.now()))
  })
}
