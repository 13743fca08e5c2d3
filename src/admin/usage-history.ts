import type { Context, Hono } from 'hono'
import { othersOf } from '../usage/keep.js'
import type { ConfigHolder } from '../config/holder.js'
import { addDays, dayBounds, daysBetween, daysInMonth, parseIsoDate } from '../quota/month.js'
import { hyphenated, parseUuid } from '../request/base-uuid.js'
import type { Ledger, Windows } from '../types.js'
import {
  callsOn,
  lastFullWeek,
  ledgerRef,
  paceOf,
  readTeamRange,
  type DayCalls,
  type MonthRow,
} from '../usage/ledger-view.js'
import { dayRows, KEEP_DAYS, monthsOf, type UsageStore } from '../usage/store.js'
import { monthOf } from './teams.js'

// SPEC §5 "History and export":
// - GET /v1/usage/history?team=ID|base=UUID[&from&to][&format=csv]: one entry per day (calls,
//   credited), one per month of the range (quota, used, credited, remaining: each month its own),
//   and the pace of the last 7 full days; `to` past today is read as today.
// - GET /v1/usage/export?from&to[&format=csv]: every team and every base with calls in the
//   range, in one answer, `date,kind,id,team,calls,credited`, streamed (a page of bases at a
//   time, however many the range holds), month by month: the teams, each class's `others`
//   (kind `others`, id the class: the calls of keys not kept by name, SPEC §4), then the bases.
// A CSV is named for its subject and range (Content-Disposition); days are monthly.timezone's;
// a cell that a spreadsheet would read as a formula is written with a leading ' (OWASP).

export interface HistoryRouteDeps {
  holder: ConfigHolder
  store: Windows
  ledger: Pick<Ledger, 'readLedger'>
  usage: UsageStore
  now: () => number
  /** This instance's counts of the last interval written first (every worker's). */
  flush: () => Promise<void>
}

type Range = { from: string; to: string; today: string; timeZone: string }
type Subject = { kind: 'team'; id: string } | { kind: 'base'; id: string }

/** from/to/format checked: a 400 naming the parameter; `to` past today is today. */
function checkRange(c: Context, deps: HistoryRouteDeps): Range | { error: string } {
  const q = (name: string) => c.req.query(name)
  const timeZone = deps.holder.current.config.monthly.timezone
  const today = dayBounds(deps.now(), timeZone).id
  const from = q('from') ?? `${today.slice(0, 7)}-01`
  let to = q('to') ?? today
  for (const [name, value] of [
    ['from', from],
    ['to', to],
  ] as const) {
    if (parseIsoDate(value) === null)
      return { error: `${name}: ${JSON.stringify(value)} is not a date (YYYY-MM-DD)` }
  }
  // Nothing is read for days that have not come (issue #40 item 6).
  if (to > today) to = today
  if (from > today) return { error: `from: ${from} is after today (${today})` }
  if (daysBetween(from, to) < 0) return { error: `from: ${from} is after to: ${to}` }
  if (daysBetween(from, to) + 1 > KEEP_DAYS)
    return { error: `to: the range ${from} to ${to} is over ${KEEP_DAYS} days` }
  const format = q('format')
  if (format !== undefined && format !== 'csv' && format !== 'json')
    return { error: `format: ${JSON.stringify(format)} is not csv or json` }
  return { from, to, today, timeZone }
}

/** The subject asked about: a 400 naming the parameter, a 404 for no such team. */
function checkSubject(
  c: Context,
  deps: HistoryRouteDeps
): Subject | { status: 400 | 404; error: string } {
  const team = c.req.query('team')
  const base = c.req.query('base')
  if ((team === undefined) === (base === undefined))
    return { status: 400, error: 'give exactly one of team=ID or base=UUID' }
  if (team !== undefined) {
    if (!deps.holder.current.teams.some((t) => t.id === team))
      return { status: 404, error: `team: ${JSON.stringify(team)} is not a team` }
    return { kind: 'team', id: team }
  }
  const uuid = parseUuid(base!)
  if (uuid === null)
    return { status: 400, error: `base: ${JSON.stringify(base)} is not a base UUID` }
  return { kind: 'base', id: uuid }
}

const wantsCsv = (c: Context) =>
  c.req.query('format') === 'csv' ||
  (c.req.query('format') === undefined && (c.req.header('accept') ?? '').includes('text/csv'))

interface Row {
  date: string
  kind: 'team' | 'base' | 'others'
  id: string
  team: string
  calls: number
  credited: number
}

const CSV_HEAD = 'date,kind,id,team,calls,credited'
/**
 * A CSV field: a text that begins with `=`, `+`, `-`, `@`, a tab or a carriage return gets a
 * leading `'` (OWASP's advice: a spreadsheet would run it as a formula; a team id is the
 * operator's text, and a client's), then quoted when it holds a comma, a quote or a line break
 * (RFC 4180). Numbers are written as they are.
 */
export function csvField(v: string | number): string {
  if (typeof v === 'number') return String(v)
  const s = /^[=+\-@\t\r]/.test(v) ? `'${v}` : v
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s
}
const csvLine = (r: Row) =>
  [r.date, r.kind, r.id, r.team, r.calls, r.credited].map(csvField).join(',') + '\n'
const csvOf = (rows: readonly Row[]) => CSV_HEAD + '\n' + rows.map(csvLine).join('')

/** `attachment; filename="…"`: what it holds and its range, in the zone's days. */
function disposition(what: string, r: Range): string {
  const name = `basegate-${what}-${r.from}_to_${r.to}-${r.timeZone.replaceAll('/', '-')}.csv`
  return `attachment; filename="${name.replace(/[^A-Za-z0-9._-]/g, '_')}"`
}

/** A team's days, months and pace over the range. */
async function teamHistory(deps: HistoryRouteDeps, id: string, r: Range) {
  const team = deps.holder.current.teams.find((t) => t.id === id)!
  const thisMonth = r.today.slice(0, 7)
  const live = deps.holder.current.config.monthly.enabled
    ? await monthOf(deps, team).then((m) => m.quota)
    : null
  const current = live === null ? null : { month: thisMonth, quota: live }
  const week = lastFullWeek(r.today)
  const span = { from: week.from < r.from ? week.from : r.from, to: r.to, timeZone: r.timeZone }
  const { days, months } = await readTeamRange(deps.ledger, id, span, current)
  const inRange = months.filter((m) => m.month >= r.from.slice(0, 7))
  const now = inRange.find((m) => m.month === thisMonth)
  const pace =
    now === undefined
      ? null
      : paceOf(
          callsOn(days, week.from, week.to),
          { used: now.used, quota: now.quota, endMs: ledgerRef(id, thisMonth, r.timeZone).endMs },
          deps.now(),
          r.timeZone,
          days
        )
  return { days, months: inRange, pace }
}

/** A base's days (no credits, no quota) and the pace of its calls. */
async function baseHistory(deps: HistoryRouteDeps, uuid: string, r: Range) {
  const week = lastFullWeek(r.today)
  const from = week.from < r.from ? week.from : r.from
  const counts = await deps.usage.read(uuid, from, r.to)
  const days = new Map<string, DayCalls>()
  for (const [d, n] of counts) days.set(d, { calls: n, credited: 0 })
  const thisMonth = r.today.slice(0, 7)
  let used = 0
  for (const [d, n] of counts) if (d.startsWith(thisMonth)) used += n
  const pace =
    r.to === r.today
      ? paceOf(
          callsOn(days, week.from, week.to),
          { used, quota: null, endMs: ledgerRef('', thisMonth, r.timeZone).endMs },
          deps.now(),
          r.timeZone,
          days
        )
      : null
  return { days, months: [] as MonthRow[], pace }
}

function rowsOf(subject: Subject, team: string, days: Map<string, DayCalls>, r: Range): Row[] {
  return dayRows(new Map([...days].map(([d, v]) => [d, v.calls])), r.from, r.to).map((d) => ({
    date: d.date,
    kind: subject.kind,
    id: subject.kind === 'base' ? hyphenated(subject.id) : subject.id,
    team,
    calls: d.calls,
    credited: days.get(d.date)?.credited ?? 0,
  }))
}

export function usageHistoryRoutes(app: Hono, deps: HistoryRouteDeps): void {
  app.get('/v1/usage/history', async (c) => {
    const s = checkSubject(c, deps)
    if ('error' in s) return c.json({ error_msg: s.error }, s.status)
    const r = checkRange(c, deps)
    if ('error' in r) return c.json({ error_msg: r.error }, 400)
    await deps.flush().catch(() => {})
    const h =
      s.kind === 'team' ? await teamHistory(deps, s.id, r) : await baseHistory(deps, s.id, r)
    const team = s.kind === 'team' ? s.id : teamOfBase(deps, s.id)
    const rows = rowsOf(s, team, h.days, r)
    if (wantsCsv(c)) {
      const what = s.kind === 'team' ? `team-${s.id}` : `base-${hyphenated(s.id)}`
      return c.body(csvOf(rows), 200, {
        'content-type': 'text/csv; charset=utf-8',
        'content-disposition': disposition(what, r),
      })
    }
    const key = s.kind === 'team' ? `team:${s.id}` : `base:${s.id}`
    const out: Record<string, unknown> = {
      key,
      id: rows[0]?.id ?? s.id,
      from: r.from,
      to: r.to,
      timezone: r.timeZone,
      days: rows.map(({ date, calls, credited }) => ({ date, calls, credited })),
      months: h.months,
      pace: h.pace,
    }
    // This month's figures for a team, as before (SPEC §5: /v1/teams reads the same).
    const now = h.months.find((m) => m.month === r.today.slice(0, 7))
    if (s.kind === 'team' && now !== undefined)
      Object.assign(out, { quota: now.quota, used: now.used })
    return c.json(out)
  })

  app.get('/v1/usage/export', async (c) => {
    const r = checkRange(c, deps)
    if ('error' in r) return c.json({ error_msg: r.error }, 400)
    await deps.flush().catch(() => {})
    // The teams' months first (the teams are the file's: few); the rows then stream.
    const months = await teamMonthsOf(deps, r)
    const csv = wantsCsv(c)
    const head = csv
      ? `${CSV_HEAD}\n`
      : `{"from":${JSON.stringify(r.from)},"to":${JSON.stringify(r.to)},"timezone":${JSON.stringify(r.timeZone)},"months":${JSON.stringify(months)},"rows":[`
    const range: Range = r
    async function* text(): AsyncGenerator<string> {
      yield head
      let first = true
      for await (const rows of exportRows(deps, range)) {
        let piece = ''
        for (const row of rows) {
          piece += csv ? csvLine(row) : `${first ? '' : ','}${JSON.stringify(row)}`
          first = false
        }
        if (piece !== '') yield piece
      }
      if (!csv) yield ']}'
    }
    const headers: Record<string, string> = {
      'content-type': csv ? 'text/csv; charset=utf-8' : 'application/json',
    }
    if (csv) headers['content-disposition'] = disposition('usage', r)
    return new Response(streamOf(text()), { status: 200, headers })
  })
}

/**
 * A body read as the client takes it (the next page is read only when the last was taken); a
 * failure mid-way (the store went away) errors the stream, so the client sees a cut transfer,
 * never a short export that looks whole.
 */
function streamOf(chunks: AsyncGenerator<string>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await chunks.next()
        if (next.done === true) controller.close()
        else controller.enqueue(encoder.encode(next.value))
      } catch (err) {
        controller.error(err)
      }
    },
    async cancel() {
      await chunks.return(undefined)
    },
  })
}

/** The team a base belongs to in the file or the admin API's changes (monthly quotas on or not). */
function teamOfBase(deps: HistoryRouteDeps, uuid: string): string {
  return deps.holder.current.teams.find((t) => t.bases.includes(uuid))?.id ?? ''
}

/** Each team's months in the range (quota, used, credited, remaining). */
async function teamMonthsOf(
  deps: HistoryRouteDeps,
  r: Range
): Promise<(MonthRow & { team: string })[]> {
  const months: (MonthRow & { team: string })[] = []
  for (const t of deps.holder.current.teams) {
    const h = await teamHistory(deps, t.id, r)
    for (const m of h.months) months.push({ team: t.id, ...m })
  }
  return months
}

/** The classes whose `others` the export lists (SPEC §4: keys not kept by name, by class). */
const OTHERS_CLASSES = ['base', 'account', 'auth_token', 'other'] as const

/**
 * Every team, class's others and base with calls in the range (days without calls left out), a
 * piece at a time, month by month: what is held is one page of bases.
 */
async function* exportRows(deps: HistoryRouteDeps, r: Range): AsyncGenerator<Row[]> {
  for (const month of monthsOf(r.from, r.to)) {
    const first = month === r.from.slice(0, 7) ? r.from : `${month}-01`
    const last =
      month === r.to.slice(0, 7) ? r.to : `${month}-${String(daysInMonth(month)).padStart(2, '0')}`
    const inMonth = { ...r, from: first, to: last }
    for (const t of deps.holder.current.teams) {
      const h = await teamHistory(deps, t.id, inMonth)
      yield rowsOf({ kind: 'team', id: t.id }, t.id, h.days, inMonth).filter(
        (row) => row.calls > 0 || row.credited > 0
      )
    }
    for (const cls of OTHERS_CLASSES) {
      const days = await deps.usage.read(othersOf(cls), first, last)
      yield [...days]
        .sort()
        .filter(([, calls]) => calls > 0)
        .map(([date, calls]): Row => ({
          date,
          kind: 'others',
          id: cls,
          team: '',
          calls,
          credited: 0,
        }))
    }
    for await (const page of deps.usage.bases(month)) {
      const reads = await Promise.all(page.map((b) => deps.usage.read(b, first, last)))
      const rows: Row[] = []
      page.forEach((uuid, k) => {
        const team = teamOfBase(deps, uuid)
        for (const [date, calls] of [...reads[k]!].sort()) {
          if (calls > 0)
            rows.push({ date, kind: 'base', id: hyphenated(uuid), team, calls, credited: 0 })
        }
      })
      yield rows
    }
  }
}

/** This month's days so far of a team (the status page's small chart), from its ledger. */
export async function monthDays(
  ledger: Pick<Ledger, 'readLedger'>,
  team: string,
  nowMs: number,
  timeZone: string
): Promise<{ days: { date: string; calls: number; credited: number }[]; days_in_month: number }> {
  const today = dayBounds(nowMs, timeZone)
  const first = `${today.month}-01`
  const l = await ledger.readLedger(ledgerRef(team, today.month, timeZone))
  const days: { date: string; calls: number; credited: number }[] = []
  for (let d = first; d <= today.id; d = addDays(d, 1)) {
    const dd = d.slice(8)
    days.push({ date: d, calls: l.days.get(dd) ?? 0, credited: l.credited.get(dd) ?? 0 })
  }
  return { days, days_in_month: daysInMonth(today.month) }
}
