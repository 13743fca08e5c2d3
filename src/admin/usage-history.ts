import type { Context, Hono } from 'hono'
import type { ConfigHolder } from '../config/holder.js'
import { dayBounds, daysBetween, daysInMonth, parseIsoDate } from '../quota/month.js'
import { parseUuid } from '../request/base-uuid.js'
import type { LimiterStore } from '../types.js'
import { dayRows, KEEP_DAYS, type UsageStore } from '../usage/store.js'
import { monthOf } from './teams.js'

// SPEC §5 usage over time: GET /v1/usage/history?team=ID|base=UUID[&from&to][&format=csv], one
// entry per day (0 where none), days in monthly.timezone; a team also gets this month's quota
// and used. CSV with `Accept: text/csv` or `format=csv`: `date,calls`, then a line per day.

export interface HistoryRouteDeps {
  holder: ConfigHolder
  store: LimiterStore
  usage: UsageStore
  now: () => number
  /** This instance's counts of the last interval written first (every worker's). */
  flush: () => Promise<void>
}

type Checked = { subject: string; key: string; team: string | null; from: string; to: string }

/** The query, checked: every problem is a 400 naming its parameter (a 404 for no such team). */
function checkQuery(
  c: Context,
  deps: HistoryRouteDeps
): Checked | { status: 400 | 404; error: string } {
  const q = (name: string) => c.req.query(name)
  const team = q('team')
  const base = q('base')
  if ((team === undefined) === (base === undefined))
    return { status: 400, error: 'give exactly one of team=ID or base=UUID' }
  const snap = deps.holder.current
  let subject: string
  let key: string
  if (team !== undefined) {
    if (!snap.teams.some((t) => t.id === team))
      return { status: 404, error: `team: ${JSON.stringify(team)} is not a team` }
    subject = `t:${team}`
    key = `team:${team}`
  } else {
    const uuid = parseUuid(base!)
    if (uuid === null)
      return { status: 400, error: `base: ${JSON.stringify(base)} is not a base UUID` }
    subject = `b:${uuid}`
    key = `base:${uuid}`
  }
  const today = dayBounds(deps.now(), snap.config.monthly.timezone).id
  const from = q('from') ?? `${today.slice(0, 7)}-01`
  const to = q('to') ?? today
  for (const [name, value] of [
    ['from', from],
    ['to', to],
  ] as const) {
    if (parseIsoDate(value) === null)
      return { status: 400, error: `${name}: ${JSON.stringify(value)} is not a date (YYYY-MM-DD)` }
  }
  if (daysBetween(from, to) < 0) return { status: 400, error: `from: ${from} is after to: ${to}` }
  if (daysBetween(from, to) + 1 > KEEP_DAYS)
    return { status: 400, error: `to: the range ${from} to ${to} is over ${KEEP_DAYS} days` }
  const format = q('format')
  if (format !== undefined && format !== 'csv' && format !== 'json')
    return { status: 400, error: `format: ${JSON.stringify(format)} is not csv or json` }
  return { subject, key, team: team ?? null, from, to }
}

const wantsCsv = (c: Context) =>
  c.req.query('format') === 'csv' ||
  (c.req.query('format') === undefined && (c.req.header('accept') ?? '').includes('text/csv'))

export function usageHistoryRoutes(app: Hono, deps: HistoryRouteDeps): void {
  app.get('/v1/usage/history', async (c) => {
    const q = checkQuery(c, deps)
    if ('error' in q) return c.json({ error_msg: q.error }, q.status)
    await deps.flush().catch(() => {})
    const counts = await deps.usage.read(q.subject, q.from, q.to)
    const days = dayRows(counts, q.from, q.to)
    if (wantsCsv(c)) {
      const csv = ['date,calls', ...days.map((d) => `${d.date},${d.calls}`)].join('\n') + '\n'
      return c.body(csv, 200, { 'content-type': 'text/csv; charset=utf-8' })
    }
    const out: Record<string, unknown> = { key: q.key, from: q.from, to: q.to, days }
    if (q.team !== null) {
      const team = deps.holder.current.teams.find((t) => t.id === q.team)!
      const m = await monthOf(deps, team).catch(() => null)
      if (m !== null) Object.assign(out, { quota: m.quota, used: m.used })
    }
    return c.json(out)
  })
}

/** This month's days so far of one subject (the status page's small chart). */
export async function monthDays(
  usage: UsageStore,
  subject: string,
  nowMs: number,
  timeZone: string
): Promise<{ days: { date: string; calls: number }[]; days_in_month: number }> {
  const today = dayBounds(nowMs, timeZone)
  const first = `${today.month}-01`
  const counts = await usage.read(subject, first, today.id)
  return { days: dayRows(counts, first, today.id), days_in_month: daysInMonth(today.month) }
}
