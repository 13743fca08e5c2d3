import { z } from 'zod'
import { checkedRates } from '../limiter/rate.js'
import { uuids } from '../request/base-uuid.js'
import { checkCidrs } from '../request/client-ip.js'
import { overrideBody, SET_ASIDE } from './schema.js'
import type { ConfigProblem, LimitedClass, OverrideConfig, RateList, TeamConfig } from '../types.js'

// SPEC §10: an override as the file or `PUT /v1/overrides/{name}` writes it, checked field by
// field (a problem names `<at>.<field>`), into the OverrideConfig the classifier compiles.

export type OverrideBody = z.infer<typeof overrideBody>

const CLASSES: readonly LimitedClass[] = ['account', 'base', 'auth_token', 'other']

/** The override's limits, each checked as a class limit is. */
function buildLimits(
  problems: ConfigProblem[],
  at: string,
  limits: OverrideBody['limits']
): OverrideConfig['limits'] {
  const out: Partial<Record<LimitedClass, RateList>> = {}
  for (const cls of CLASSES) {
    const v = limits[cls]
    if (v !== undefined) out[cls] = checkedRates(problems, `${at}.limits.${cls}`, v)
  }
  if (Object.keys(out).length === 0)
    problems.push({
      field: `${at}.limits`,
      message: 'names no class (account, base, auth_token, other)',
    })
  return out
}

/** One override, its cross-field checks against the teams the configuration knows. */
export function buildOverride(
  problems: ConfigProblem[],
  at: string,
  name: string,
  body: OverrideBody,
  teamIds: ReadonlySet<string>
): OverrideConfig {
  const bases = uuids(problems, `${at}.bases`, body.bases ?? [])
  const teams = body.teams ?? []
  teams.forEach((t, j) => {
    if (!teamIds.has(t))
      problems.push({
        field: `${at}.teams[${j}]`,
        message: `${JSON.stringify(t)} is not a team of monthly.teams`,
      })
  })
  const clients = body.clients ?? []
  checkCidrs(problems, `${at}.clients`, clients)
  if (bases.length + teams.length + clients.length === 0)
    problems.push({ field: at, message: 'names no base, team or client' })
  const shared = body.shared ?? false
  if (shared && (bases.length > 0 || clients.length > 0 || teams.length === 0))
    problems.push({
      field: `${at}.shared`,
      message:
        'is for teams only: an override with shared: true names teams, and no bases or clients',
    })
  return {
    name,
    bases,
    teams,
    clients,
    limits: buildLimits(problems, at, body.limits),
    shared,
    mode: body.mode ?? 'enforce',
  }
}

/** The file's overrides, in order; two with one name are refused. */
export function buildOverrides(
  problems: ConfigProblem[],
  list: readonly (OverrideBody & { name: string })[],
  teams: readonly TeamConfig[]
): OverrideConfig[] {
  const teamIds = new Set(teams.map((t) => t.id))
  const names = new Set<string>()
  const out: OverrideConfig[] = []
  list.forEach((o, i) => {
    // A broken one was set aside whole and its problems named (config/load.ts).
    if (o.name.startsWith(SET_ASIDE)) return
    if (names.has(o.name))
      problems.push({
        field: `overrides[${i}].name`,
        message: `${JSON.stringify(o.name)} is used by another override`,
      })
    names.add(o.name)
    out.push(buildOverride(problems, `overrides[${i}]`, o.name, o, teamIds))
  })
  return out
}
