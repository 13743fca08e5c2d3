import type { Context, Hono } from 'hono'
import type { Metrics } from '../observe/metrics.js'
import type { ConfigHolder } from '../config/holder.js'
import { parseUuid } from '../request/base-uuid.js'
import type { ChangeStore } from '../config/changes.js'
import { quotaOf, type Team, type TeamChange } from '../quota/teams.js'
import { JsonBodyScanner, JsonSyntaxError } from '../size/json-count.js'
import type { LimiterStore, Logger } from '../types.js'

export interface TeamDeps {
  holder: ConfigHolder
  store: LimiterStore
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

export function teamRoutes(app: Hono, deps: TeamDeps): void {
  const { holder, changes } = deps

  async function teamJson(team: Team) {
    const m = holder.current.config.monthly.enabled
      ? await monthOf(deps, team)
      : { used: 0, quota: team.quota, reset: 0 }
    const { id, plan, users, bases, changed } = team
    return { id, plan, users, bases, quota: m.quota, used: m.used, reset: m.reset, changed }
  }

  const notFound = (c: Context, id: string) =>
    c.json({ error_msg: `no team ${JSON.stringify(id)} in the configuration` }, 404)

  /**
   * A read answers what the shared store holds now: a change made on another instance a moment
   * ago may not have reached this one's subscription yet. With the store down, the last view
   * this instance had.
   */
  const refresh = () => holder.tryRefreshTeams(changes)

  app.get('/v1/teams', async (c) => {
    await refresh()
    const teams = []
    for (const t of holder.current.teams) teams.push(await teamJson(t))
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
    return c.json(await teamJson(holder.current.teams.find((t) => t.id === id)!))
  })

  // SPEC §5: this month's used count lowered by n (never below 0), for every instance at once.
  app.post('/v1/teams/:id/credit', async (c) => {
    const id = c.req.param('id')
    const team = holder.current.teams.find((t) => t.id === id)
    if (!team) return notFound(c, id)
    const body = await readAdminJson(c)
    if ('error' in body) return c.json({ error_msg: body.error }, 400)
    const calls = creditOf(body.json)
    if (typeof calls !== 'number') return c.json({ error_msg: calls.error }, 400)
    if (deps.store.credit === undefined)
      return c.json({ error_msg: 'this store cannot credit a month' }, 503)
    const charge = holder.current.classifier.monthlyChargeOf(team, deps.now())
    const { before, after } = await deps.store.credit(charge, calls)
    deps.logger?.info(
      { team: id, calls, used_before: before, used_after: after },
      'monthly quota credited'
    )
    return c.json(await teamJson(team))
  })

  app.delete('/v1/teams/:id', async (c) => {
    const id = c.req.param('id')
    if (!holder.current.config.monthly.teams.some((t) => t.id === id)) return notFound(c, id)
    await changes.deleteTeam(id)
    holder.setTeamChanges(await changes.loadTeams())
    return c.json(await teamJson(holder.current.teams.find((t) => t.id === id)!))
  })
}

/** A credit's body: `{"calls": n}`, n a positive integer, and nothing else. */
export function creditOf(json: unknown): number | { error: string } {
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    return { error: 'the body must be a JSON object {"calls": n}' }
  const extra = Object.keys(json).filter((k) => k !== 'calls')
  if (extra.length > 0) return { error: `${extra[0]}: is not a known key (only calls)` }
  const n = (json as { calls?: unknown }).calls
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1)
    return { error: `calls: ${JSON.stringify(n ?? null)} is not a positive integer` }
  return n
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
