import { timingSafeEqual } from 'node:crypto'
import { Hono, type Context } from 'hono'
import ipaddr from 'ipaddr.js'
import type { ConfigHolder } from '../config/holder.js'
import { parseUuid } from '../http/base-uuid.js'
import type { Metrics } from '../observe/metrics.js'
import type { OverrideStore } from '../quota/overrides.js'
import { quotaOf, type Team, type TeamOverride } from '../quota/teams.js'
import type { Charge, ConfigProblem, LimiterStore, WindowState } from '../types.js'
import { maskedConfig } from './mask.js'

// SPEC §7: the admin listener. JSON answers; errors `{"error_msg": ...}`.

/** The admin GET paths without parameters (deploy probes and scrapes must use these). */
export const ADMIN_PATHS = ['/healthz', '/readyz', '/metrics', '/v1/teams', '/v1/config'] as const

export interface AdminDeps {
  holder: ConfigHolder
  store: LimiterStore
  overrides: OverrideStore
  metrics: Metrics
  /** Re-reads the config file (the same path as SIGHUP and a file change). */
  reload: () => Promise<{ ok: true } | { ok: false; problems: ConfigProblem[] }>
  now?: () => number
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

const fail = (
  c: Context,
  status: 400 | 404 | 500 | 503,
  message: string,
  extra: Record<string, unknown> = {}
) => c.json({ error_msg: message, ...extra }, status)

function windowJson(charge: Charge, w: WindowState) {
  return {
    class: charge.cls,
    ...(charge.rule ? { rule: charge.rule } : {}),
    ...(charge.kind === 'ip_ceiling' ? { ip_ceiling: true } : {}),
    limit: w.limit,
    window_s: charge.windowMs / 1000,
    used: w.used,
    remaining: w.remaining,
    reset: Math.ceil(w.resetAtMs / 1000),
  }
}

export function createAdminApp(deps: AdminDeps): Hono {
  const { holder, store, overrides, metrics } = deps
  const now = deps.now ?? Date.now
  const app = new Hono()

  app.use('*', async (c, next) => {
    const token = holder.current.config.admin.token
    if (token === '') return next()
    // SPEC §7: every admin call needs `Authorization: Bearer <token>`; anything else is 401.
    const given = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1]?.trim() ?? ''
    if (!sameSecret(given, token)) {
      return c.json({ error_msg: 'a valid admin bearer token is required' }, 401, {
        'www-authenticate': 'Bearer',
      })
    }
    return next()
  })

  app.get('/healthz', (c) => c.json({ status: 'ok' }))
  app.get('/readyz', async (c) => {
    const ready = await store.ready()
    return c.json({ status: ready ? 'ready' : 'store unavailable' }, ready ? 200 : 503)
  })

  app.get('/metrics', async (c) => {
    await refreshMonthlyGauges()
    return c.body(await metrics.registry.metrics(), 200, {
      'content-type': metrics.registry.contentType,
    })
  })

  /** A team's month as the store has it now (monthly window read without charging). */
  async function monthOf(team: Team): Promise<{ used: number; quota: number; reset: number }> {
    const t = now()
    const d = await store.peek([holder.current.classifier.monthlyChargeOf(team, t)], t)
    const w = d.windows[0]!
    return { used: w.used, quota: w.limit, reset: Math.ceil(w.resetAtMs / 1000) }
  }

  async function refreshMonthlyGauges(): Promise<void> {
    const snap = holder.current
    if (!snap.config.monthly.enabled) return
    for (const team of snap.teams) {
      try {
        const m = await monthOf(team)
        metrics.monthlyUsed.set({ team: team.id }, m.used)
        metrics.monthlyQuota.set({ team: team.id }, m.quota)
      } catch {
        // The store is down: the gauges keep their last values; the store metrics say why.
      }
    }
  }

  async function teamJson(team: Team) {
    const m = holder.current.config.monthly.enabled
      ? await monthOf(team)
      : { used: 0, quota: team.quota, reset: 0 }
    return {
      id: team.id,
      plan: team.plan,
      users: team.users,
      bases: team.bases,
      quota: m.quota,
      used: m.used,
      reset: m.reset,
      changed: team.changed,
    }
  }

  async function usage(c: Context, key: string, charges: Charge[]) {
    const t = now()
    const d = await store.peek(charges, t)
    const windows = []
    let monthly = null
    for (let i = 0; i < charges.length; i++) {
      const ch = charges[i]!
      const w = d.windows[i]!
      if (ch.kind === 'monthly')
        monthly = {
          team: ch.team!,
          quota: w.limit,
          used: w.used,
          reset: Math.ceil(w.resetAtMs / 1000),
        }
      else windows.push(windowJson(ch, w))
    }
    return c.json({ key, windows, monthly })
  }

  app.get('/v1/usage/base/:uuid', async (c) => {
    const uuid = parseUuid(c.req.param('uuid'))
    if (uuid === null)
      return fail(c, 400, `${JSON.stringify(c.req.param('uuid'))} is not a base UUID`)
    return usage(c, `base:${uuid}`, holder.current.classifier.windowsOfBase(uuid, now()))
  })

  app.get('/v1/usage/ip/:ip', async (c) => {
    const raw = c.req.param('ip')
    if (!ipaddr.isValid(raw)) return fail(c, 400, `${JSON.stringify(raw)} is not an IP address`)
    const snap = holder.current
    const ipKey = snap.clientIp.keyOf(ipaddr.process(raw).toString())
    return usage(c, `ip:${ipKey}`, snap.classifier.windowsOfIp(ipKey))
  })

  app.get('/v1/teams', async (c) => {
    const teams = []
    for (const t of holder.current.teams) teams.push(await teamJson(t))
    return c.json({ teams })
  })

  app.put('/v1/teams/:id', async (c) => {
    const id = c.req.param('id')
    const snap = holder.current
    const fileTeam = snap.config.monthly.teams.find((t) => t.id === id)
    if (!fileTeam) return fail(c, 404, `no team ${JSON.stringify(id)} in the configuration`)
    let body: unknown
    try {
      body = await c.req.json()
    } catch {
      return fail(c, 400, 'the body is not valid JSON')
    }
    const parsed = parseTeamChange(body, snap.config.monthly.plans, snap.teams, id)
    if ('error' in parsed) return fail(c, 400, parsed.error)
    const merged: TeamOverride = { ...holder.teamOverrides.get(id), ...parsed.change }
    const plan = merged.plan ?? fileTeam.plan
    const users = merged.users ?? fileTeam.users
    await overrides.set(id, merged, quotaOf(snap.config.monthly.plans[plan], users))
    holder.setTeamOverrides(await overrides.load())
    return c.json(await teamJson(holder.current.teams.find((t) => t.id === id)!))
  })

  app.delete('/v1/teams/:id', async (c) => {
    const id = c.req.param('id')
    const snap = holder.current
    if (!snap.config.monthly.teams.some((t) => t.id === id))
      return fail(c, 404, `no team ${JSON.stringify(id)} in the configuration`)
    await overrides.delete(id)
    holder.setTeamOverrides(await overrides.load())
    return c.json(await teamJson(holder.current.teams.find((t) => t.id === id)!))
  })

  app.post('/v1/reload', async (c) => {
    const r = await deps.reload()
    if (!r.ok) {
      const problems = r.problems.map((p) => `${p.field}: ${p.message}`)
      return fail(c, 400, 'the configuration was refused; the running one stays', { problems })
    }
    const cfg = holder.current.config
    return c.json({
      reloaded: true,
      file: holder.file,
      deployment: cfg.deployment,
      mode: cfg.mode,
      teams: holder.current.teams.length,
    })
  })

  app.get('/v1/config', (c) => c.json(maskedConfig(holder.current.config)))

  app.notFound((c) => c.json({ error_msg: 'not found' }, 404))
  app.onError((err, c) => {
    const storeDown = err.name === 'StoreError'
    return c.json(
      { error_msg: storeDown ? 'the store is unavailable' : 'internal error' },
      storeDown ? 503 : 500
    )
  })
  return app
}

/** Validates a PUT /v1/teams body: `{plan?, users?, bases?}` and nothing else. */
export function parseTeamChange(
  body: unknown,
  plans: Readonly<Record<string, unknown>>,
  teams: readonly Team[],
  id: string
): { change: TeamOverride } | { error: string } {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    return { error: 'the body must be a JSON object {plan?, users?, bases?}' }
  const change: TeamOverride = {}
  for (const [k, v] of Object.entries(body)) {
    if (k === 'plan') {
      if (typeof v !== 'string' || !(v in plans))
        return {
          error: `plan: ${JSON.stringify(v)} is not a plan (${Object.keys(plans).join(', ')})`,
        }
      change.plan = v
    } else if (k === 'users') {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
        return { error: `users: ${JSON.stringify(v)} is not a positive whole number` }
      change.users = v
    } else if (k === 'bases') {
      if (!Array.isArray(v)) return { error: 'bases: must be a list of base UUIDs' }
      const bases: string[] = []
      for (const b of v) {
        const u = typeof b === 'string' ? parseUuid(b) : null
        if (u === null) return { error: `bases: ${JSON.stringify(b)} is not a base UUID` }
        const owner = teams.find((t) => t.id !== id && t.bases.includes(u))
        if (owner) return { error: `bases: ${b} belongs to team ${JSON.stringify(owner.id)}` }
        bases.push(u)
      }
      change.bases = bases
    } else {
      return { error: `${k}: is not a known field (plan, users, bases)` }
    }
  }
  return { change }
}
