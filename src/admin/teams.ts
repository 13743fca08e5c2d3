import type { Context, Hono } from 'hono'
import type { Metrics } from '../observe/metrics.js'
import type { ConfigHolder } from '../config/holder.js'
import { hyphenated, parseUuid } from '../request/base-uuid.js'
import type { ChangeStore } from '../config/changes.js'
import { quotaOf, type Team, type TeamChange } from '../quota/teams.js'
import { JsonBodyScanner, JsonSyntaxError } from '../size/json-count.js'
import type { CreditEntry, Ledger, Logger, Windows } from '../types.js'
import { monthBounds } from '../quota/month.js'
import { ledgerRef } from '../usage/ledger-view.js'

export interface TeamDeps {
  holder: ConfigHolder
  store: Windows
  ledger: Ledger
  changes: ChangeStore
  now: () => number
  /** The credit's info line (SPEC §5). */
  logger?: Logger
}

/** The largest user count a team may be given (keeps every quota an exact integer). */
const MAX_USERS = 1_000_000

/** A team's month as the store has it now (the monthly window read without charging). */
export async function monthOf(
  deps: Pick<TeamDeps, 'holder' | 'store' | 'now'>,
  team: Team
): Promise<{ used: number; quota: number; reset: number }> {
  const t = deps.now()
  const d = await deps.store.peek([deps.holder.current.classifier.monthlyChargeOf(team, t)], t)
  const w = d.windows[0]!
  return { used: w.used, quota: w.limit, reset: Math.ceil(w.resetAtMs / 1000) }
}

/** A team as /v1/teams answers it (SPEC §5: `used` is its ledger's, quotas on or off). */
async function teamJson(deps: TeamDeps, team: Team) {
  const m = await monthOf(deps, team)
  const { id, plan, users, bases, changed } = team
  // SPEC §7: bases as clients send them (hyphenated), whatever spelling the file used.
  const shown = bases.map(hyphenated)
  return { id, plan, users, bases: shown, quota: m.quota, used: m.used, reset: m.reset, changed }
}

const notFound = (c: Context, id: string) =>
  c.json({ error_msg: `no team ${JSON.stringify(id)} in the configuration` }, 404)

export function teamRoutes(app: Hono, deps: TeamDeps): void {
  const { holder, changes } = deps
  const teamJsonOf = (team: Team) => teamJson(deps, team)

  /**
   * A read answers what the shared store holds now: a change made on another instance a moment
   * ago may not have reached this one's subscription yet. With the store down, the last view
   * this instance had.
   */
  const refresh = () => holder.tryRefreshTeams(changes)

  app.get('/v1/teams', async (c) => {
    await refresh()
    const teams = []
    for (const t of holder.current.teams) teams.push(await teamJsonOf(t))
    return c.json({ teams })
  })

  app.put('/v1/teams/:id', async (c) => {
    const id = c.req.param('id')
    const snap = holder.current
    const fileTeam = snap.config.monthly.teams.find((t) => t.id === id)
    if (!fileTeam) return notFound(c, id)
    const body = await readAdminJson(c)
    if ('error' in body) return c.json({ error_msg: body.error }, 400)
    const parsed = parseTeamChange(body.json, snap.config.monthly.plans, snap.teams, id)
    if ('error' in parsed) return c.json({ error_msg: parsed.error }, 400)
    const merged: TeamChange = { ...holder.teamChanges.get(id), ...parsed.change }
    const plan = merged.plan ?? fileTeam.plan
    const users = merged.users ?? fileTeam.users
    await changes.setTeam(id, merged, quotaOf(snap.config.monthly.plans[plan], users))
    holder.setTeamChanges(await changes.loadTeams())
    return c.json(await teamJsonOf(holder.current.teams.find((t) => t.id === id)!))
  })

  app.delete('/v1/teams/:id', async (c) => {
    const id = c.req.param('id')
    if (!holder.current.config.monthly.teams.some((t) => t.id === id)) return notFound(c, id)
    await changes.deleteTeam(id)
    holder.setTeamChanges(await changes.loadTeams())
    return c.json(await teamJsonOf(holder.current.teams.find((t) => t.id === id)!))
  })
}

/** SPEC §5 credits: POST /v1/teams/{id}/credit, GET /v1/teams/{id}/credits?month=. */
export function creditRoutes(app: Hono, deps: TeamDeps): void {
  const { holder } = deps
  // SPEC §5: this month's used count lowered by n (never below 0), for every instance at once,
  // kept as an entry with its note; the notices it takes `used` back under are armed again.
  app.post('/v1/teams/:id/credit', async (c) => {
    const id = c.req.param('id')
    const team = holder.current.teams.find((t) => t.id === id)
    if (!team) return notFound(c, id)
    const body = await readAdminJson(c)
    if ('error' in body) return c.json({ error_msg: body.error }, 400)
    const asked = creditOf(body.json)
    if ('error' in asked) return c.json({ error_msg: asked.error }, 400)
    const now = deps.now()
    const charge = holder.current.classifier.monthlyChargeOf(team, now)
    const ref = { team: id, month: charge.month, endMs: charge.endMs }
    const quota = (await monthOf(deps, team)).quota
    const entry = await deps.ledger.credit(ref, { ...asked, atMs: now, day: charge.day, quota })
    deps.logger?.info(
      {
        team: id,
        calls: entry.calls,
        asked: entry.asked,
        note: entry.note ?? undefined,
        used_before: entry.before,
        used_after: entry.after,
      },
      'monthly quota credited'
    )
    return c.json({ ...(await teamJson(deps, team)), credit: creditJson(entry) })
  })

  // SPEC §5: a month's credits, oldest first.
  app.get('/v1/teams/:id/credits', async (c) => {
    const id = c.req.param('id')
    const team = holder.current.teams.find((t) => t.id === id)
    if (!team) return notFound(c, id)
    const tz = holder.current.config.monthly.timezone
    const month = c.req.query('month') ?? monthBounds(deps.now(), tz).id
    if (!/^\d{4}-(0[1-9]|1[0-2])$/.test(month))
      return c.json({ error_msg: `month: ${JSON.stringify(month)} is not a month (YYYY-MM)` }, 400)
    const l = await deps.ledger.readLedger(ledgerRef(id, month, tz))
    return c.json({ team: id, month, timezone: tz, credits: l.credits.map(creditJson) })
  })
}

/** The most characters a credit's note holds. */
export const MAX_NOTE = 200

/** A credit's body: `{"calls": n, "note"?: text}`, n a positive integer, and nothing else. */
export function creditOf(
  json: unknown
): { calls: number; note: string | null } | { error: string } {
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    return { error: 'the body must be a JSON object {"calls": n, "note"?: "why"}' }
  const extra = Object.keys(json).filter((k) => k !== 'calls' && k !== 'note')
  if (extra.length > 0) return { error: `${extra[0]}: is not a known key (calls, note)` }
  const { calls: n, note } = json as { calls?: unknown; note?: unknown }
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1)
    return { error: `calls: ${JSON.stringify(n ?? null)} is not a positive integer` }
  if (note === undefined || note === null) return { calls: n, note: null }
  if (typeof note !== 'string') return { error: `note: ${JSON.stringify(note)} is not text` }
  if ([...note].length > MAX_NOTE) return { error: `note: is over ${MAX_NOTE} characters` }
  // One line in the log and the CSV: control characters are not a note's.
  if (/[\u0000-\u001f\u007f]/.test(note))
    return { error: 'note: has a control character (a line break, a tab)' }
  return { calls: n, note }
}

/** A credit entry as the admin API answers it. */
function creditJson(e: CreditEntry) {
  return {
    at: new Date(e.atMs).toISOString(),
    calls: e.calls,
    asked: e.asked,
    note: e.note,
    used_before: e.before,
    used_after: e.after,
  }
}

function parseBases(v: unknown, teams: readonly Team[], id: string): string[] | { error: string } {
  if (!Array.isArray(v)) return { error: 'bases: must be a list of base UUIDs' }
  const bases: string[] = []
  for (const b of v) {
    const u = typeof b === 'string' ? parseUuid(b) : null
    if (u === null) return { error: `bases: ${JSON.stringify(b)} is not a base UUID` }
    if (bases.includes(u)) return { error: `bases: ${b} is listed twice` }
    const owner = teams.find((t) => t.id !== id && t.bases.includes(u))
    if (owner) return { error: `bases: ${b} belongs to team ${JSON.stringify(owner.id)}` }
    bases.push(u)
  }
  return bases
}

/** Validates a PUT /v1/teams body: `{plan?, users?, bases?}` and nothing else. */
export function parseTeamChange(
  body: unknown,
  plans: Readonly<Record<string, unknown>>,
  teams: readonly Team[],
  id: string
): { change: TeamChange } | { error: string } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { error: 'the body must be a JSON object {plan?, users?, bases?}' }
  }
  const change: TeamChange = {}
  for (const [k, v] of Object.entries(body)) {
    if (k === 'plan') {
      // Own keys only: `__proto__`, `constructor` or `toString` are not plans.
      if (typeof v !== 'string' || !Object.hasOwn(plans, v)) {
        return {
          error: `plan: ${JSON.stringify(v)} is not a plan (${Object.keys(plans).join(', ')})`,
        }
      }
      change.plan = v
    } else if (k === 'users') {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_USERS) {
        return { error: `users: ${JSON.stringify(v)} is not a whole number from 1 to ${MAX_USERS}` }
      }
      change.users = v
    } else if (k === 'bases') {
      const bases = parseBases(v, teams, id)
      if ('error' in bases) return bases
      change.bases = bases
    } else {
      return { error: `${k}: is not a known field (plan, users, bases)` }
    }
  }
  return { change }
}

/** The monthly gauges as the store has them, read at scrape time. */
export async function refreshMonthlyGauges(deps: TeamDeps, metrics: Metrics): Promise<void> {
  const snap = deps.holder.current
  if (!snap.config.monthly.enabled) return
  for (const team of snap.teams) {
    try {
      const m = await monthOf(deps, team)
      metrics.monthlyUsed.set({ team: team.id }, m.used)
      metrics.monthlyQuota.set({ team: team.id }, m.quota)
    } catch {
      // The store is down: the gauges keep their last values; the store metrics say why.
    }
  }
}

/**
 * An admin body as JSON, checked first by the size room's scanner: valid JSON nested at most
 * 512 levels (issue #22: a 400,000-deep body crashed the route with a 500).
 */
export async function readAdminJson(c: Context): Promise<{ json: unknown } | { error: string }> {
  const bytes = Buffer.from(await c.req.arrayBuffer())
  const scanner = new JsonBodyScanner({ count: null })
  try {
    scanner.write(bytes)
    scanner.end()
  } catch (err) {
    if (err instanceof JsonSyntaxError) return { error: err.message }
    throw err
  }
  return { json: JSON.parse(bytes.toString('utf8')) }
}
