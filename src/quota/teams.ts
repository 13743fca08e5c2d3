import type { Config, PlanConfig, TeamConfig } from '../types.js'

// SPEC §5: teams own bases; a team's monthly quota is its plan's `calls`, or
// `calls_per_user × users`. The file's teams, with the admin API's changes over them.

/** What `PUT /v1/teams/{id}` may change; kept in the store, over the file's values. */
export interface TeamChange {
  plan?: string
  users?: number
  bases?: string[]
}

export interface Team {
  id: string
  plan: string
  users: number
  /** Canonical base UUIDs (32 hex, lower case). */
  bases: readonly string[]
  quota: number
  /** Set by the admin API (SPEC §7 `changed`). */
  changed: boolean
}

export function quotaOf(plan: PlanConfig | undefined, users: number): number {
  if (plan === undefined) return 0
  return plan.calls ?? (plan.callsPerUser ?? 0) * users
}

/** The effective teams: each file team with its admin-API change applied; changes of teams no longer in the file are ignored. */
export function effectiveTeams(config: Config, changes: ReadonlyMap<string, TeamChange>): Team[] {
  return config.monthly.teams.map((t: TeamConfig) => {
    const o = changes.get(t.id)
    const plan = o?.plan !== undefined && o.plan in config.monthly.plans ? o.plan : t.plan
    const users = o?.users ?? t.users
    const bases = o?.bases ?? t.bases
    return {
      id: t.id,
      plan,
      users,
      bases,
      quota: quotaOf(config.monthly.plans[plan], users),
      changed: o !== undefined,
    }
  })
}

/** base UUID → team. A base listed by two teams counts for the first one. */
export function teamsByBase(teams: readonly Team[]): Map<string, Team> {
  const out = new Map<string, Team>()
  for (const t of teams) for (const b of t.bases) if (!out.has(b)) out.set(b, t)
  return out
}
