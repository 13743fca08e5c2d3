import type { Hono } from 'hono'
import type { ConfigHolder } from '../config/holder.js'
import { ledgerRef } from '../usage/ledger-view.js'
import type { Ledger } from '../types.js'
import { tuneReport } from '../tuning/report.js'
import type { ShapeStore } from '../tuning/shape-store.js'
import { KEEP_DAYS } from '../tuning/shape.js'

// SPEC §11: POST /v1/tuning, the candidate file as the body: what it would have done to the
// calls of the last `days` days (default 7, at most 35), judged against the running file; a
// candidate that fails `check` gets its problems instead (400).

export interface TuningDeps {
  holder: ConfigHolder
  ledger: Pick<Ledger, 'readLedger'>
  shapes: ShapeStore
  now: () => number
  /** What this instance holds, written first (the last interval is in the report). */
  flush: () => Promise<void>
}

export const DEFAULT_DAYS = 7

/** `days`: 1 to KEEP_DAYS; an error naming it otherwise. */
export function daysOf(text: string | undefined): number | { error: string } {
  if (text === undefined) return DEFAULT_DAYS
  const n = Number(text)
  if (!/^\d+$/.test(text) || n < 1 || n > KEEP_DAYS)
    return { error: `days: ${JSON.stringify(text)} is not a number of days (1 to ${KEEP_DAYS})` }
  return n
}

export function tuningRoutes(app: Hono, deps: TuningDeps): void {
  app.post('/v1/tuning', async (c) => {
    const days = daysOf(c.req.query('days'))
    if (typeof days !== 'number') return c.json({ error_msg: days.error }, 400)
    const text = await c.req.text()
    if (text.trim() === '')
      return c.json({ error_msg: 'the body must be the candidate limits.yaml' }, 400)
    const parsed = deps.holder.candidate(text)
    if (!parsed.ok)
      return c.json(
        {
          error_msg: 'the candidate does not pass check',
          problems: parsed.problems.map((p) => `${p.field}: ${p.message}`),
        },
        400
      )
    await deps.flush().catch(() => {})
    const running = deps.holder.current
    const zone = running.config.monthly.timezone
    const report = await tuneReport({
      running,
      candidate: parsed.snapshot,
      store: deps.shapes,
      days,
      nowMs: deps.now(),
      detail: c.req.query('keys') === 'all',
      ledgerDays: async (team, month) =>
        (await deps.ledger.readLedger(ledgerRef(team, month, zone))).days,
    })
    return c.json(report)
  })
}

/** SPEC §11 on the status page: each limit in force beside the keys' busiest minutes. */
export interface TuningSummary {
  as_of_ms: number
  days: number
  limits: {
    id: string
    limit: string
    per_minute: number | null
    keys: number
    p50: number
    p90: number
    p99: number
    max: number
    suggested: string
    with_headroom: string
    note: string | null
  }[]
}

/** How old the page's summary may grow before it is worked out again (in the background). */
const SUMMARY_MS = 10 * 60_000
const EMPTY_MS = 15_000

/**
 * The summary the page shows, worked out at most every 10 minutes in the background, after
 * this instance's counts are written (the page never waits on it: null until the first is
 * ready; one with no calls yet is worked out again after 15 s).
 */
export function createTuningSummary(deps: Omit<TuningDeps, 'ledger'>) {
  let kept: TuningSummary | null = null
  let busy = false
  return (): TuningSummary | null => {
    const now = deps.now()
    const age = kept === null ? Infinity : now - kept.as_of_ms
    if (!busy && age > (kept?.limits.length === 0 ? EMPTY_MS : SUMMARY_MS)) {
      busy = true
      const running = deps.holder.current
      tuneReport({
        running,
        candidate: running,
        store: deps.shapes,
        days: DEFAULT_DAYS,
        nowMs: now,
      })
        .then((r) => {
          kept = {
            as_of_ms: now,
            days: r.days,
            limits: r.suggestions.map((x) => ({
              id: x.id,
              limit: x.limit,
              per_minute: x.per_minute,
              keys: x.keys,
              ...x.busiest_minute,
              suggested: x.suggested,
              with_headroom: x.with_headroom,
              note: x.note,
            })),
          }
        })
        .catch(() => {})
        .finally(() => (busy = false))
    }
    return kept
  }
}
