import { createMonthClock } from '../quota/month.js'
import { teamKeys, type Team } from '../quota/teams.js'
import type {
  Charge,
  Classification,
  Config,
  RateList,
  RequestClass,
  RuleConfig,
} from '../types.js'
import { baseUuidOfPath, UUID_PATTERN } from './base-uuid.js'

// SPEC §3, compiled once per configuration: the per-request work is a few string compares,
// one UUID regex, and the rules' regexes.

const AUTH_TOKEN_PATH = '/api2/auth-token'
const BASE_PREFIX = '/api-gateway/'
const ACCOUNT_PREFIXES = ['/api/v2.1/', '/api2/', '/api/v1/']

interface CompiledRule {
  name: string
  methods: ReadonlySet<string> | null
  re: RegExp
  limits: RateList
}

export interface Classifier {
  classify(method: string, path: string, clientIpKey: string, nowMs: number): Classification
  /** Every window counted on a base's key, whatever the path (for the usage API). */
  windowsOfBase(uuid: string, nowMs: number): Charge[]
  /** Every window counted on a client's key (for the usage API). */
  windowsOfIp(ipKey: string): Charge[]
  /** The team a base belongs to, when monthly quotas are on. */
  teamOf(uuid: string): Team | undefined
  /** A team's monthly window this month (the one its calls are charged to). */
  monthlyChargeOf(team: Team, nowMs: number): Charge
}

/** `{base_uuid}` matches any UUID form; `*` at the end matches any rest; trailing / optional. */
export function compileRulePath(pattern: string): RegExp {
  let p = pattern
  const star = p.endsWith('*')
  if (star) p = p.slice(0, -1)
  else if (p.length > 1 && p.endsWith('/')) p = p.slice(0, -1)
  const parts = p.split('{base_uuid}').map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
  const body = parts.join(UUID_PATTERN)
  return new RegExp(`^${body}${star ? '.*' : '/?'}$`, 'i')
}

function wholePath(lowerPath: string): string {
  return lowerPath.length > 1 && lowerPath.endsWith('/') ? lowerPath.slice(0, -1) : lowerPath
}

/**
 * Store keys. The part in braces is a Redis Cluster hash tag, chosen so that every window of
 * one request's subject lands in one slot and one script on one node can check them all:
 * `{b:<uuid>}` for a base, `{ip:<addr>}` for a client, and `{t:<team>}` for every base of a
 * team with a monthly quota, so its bases' windows, the team's monthly counter and its
 * override share a slot. (`ip_ceiling` follows the client, in the client's slot.)
 */
export const storeKeys = {
  cls: (subject: string, cls: RequestClass, windowMs: number) => `${subject}:${cls}:${windowMs}`,
  rule: (subject: string, rule: string, windowMs: number) => `${subject}:rule:${rule}:${windowMs}`,
  ipCeiling: (ipKey: string, windowMs: number) => `{ip:${ipKey}}:ceiling:${windowMs}`,
}

/** The key prefix of a subject: its hash tag and, inside a team's slot, the base. */
function subjectOf(uuid: string | null, team: Team | undefined, ipKey: string): string {
  if (uuid === null) return `{ip:${ipKey}}`
  return team === undefined ? `{b:${uuid}}` : `{${teamKeys.tag(team.id)}}:b:${uuid}`
}

export function compileClassifier(
  config: Config,
  teams: ReadonlyMap<string, Team> = new Map()
): Classifier {
  const exempt = new Set(config.exempt.map((p) => wholePath(p.toLowerCase())))
  const classRates: Record<Exclude<RequestClass, 'exempt'>, RateList> = {
    auth_token: config.rateLimits.authToken,
    base: config.rateLimits.base,
    account: config.rateLimits.account,
    other: config.rateLimits.other,
  }
  const rules: CompiledRule[] = config.rateLimits.rules
    .filter((r: RuleConfig) => r.limits.length > 0)
    .map((r) => ({
      name: r.name,
      methods: r.methods ? new Set(r.methods) : null,
      re: compileRulePath(r.path),
      limits: r.limits,
    }))
  const ipCeiling = config.rateLimits.ipCeiling
  const headers = config.headers
  const monthly = config.monthly.enabled
  const monthOf = createMonthClock(config.monthly.timezone)
  const teamOf = (uuid: string) => (monthly ? teams.get(uuid) : undefined)

  function monthlyCharge(team: Team, cls: RequestClass, nowMs: number): Charge {
    // The quota is the team's, whatever class charged it: cls only labels the window.
    const month = monthOf(nowMs)
    return {
      key: teamKeys.month(team.id, month.id),
      limit: team.quota,
      windowMs: 0,
      endMs: month.endMs,
      limitKey: teamKeys.override(team.id),
      kind: 'monthly',
      cls,
      team: team.id,
    }
  }

  function classOf(lowerPath: string): RequestClass {
    const whole = wholePath(lowerPath)
    if (exempt.has(whole)) return 'exempt'
    if (whole === AUTH_TOKEN_PATH) return 'auth_token'
    if (lowerPath.startsWith(BASE_PREFIX)) return 'base'
    for (const prefix of ACCOUNT_PREFIXES) if (lowerPath.startsWith(prefix)) return 'account'
    return 'other'
  }

  function classify(
    method: string,
    path: string,
    clientIpKey: string,
    nowMs: number
  ): Classification {
    const lowerPath = path.toLowerCase()
    const cls = classOf(lowerPath)
    const uuid = baseUuidOfPath(path)
    const key = uuid !== null ? `base:${uuid}` : `ip:${clientIpKey}`
    const charges: Charge[] = []
    if (cls === 'exempt') return { cls, key, charges, emitHeaders: false }

    const team = uuid === null ? undefined : teamOf(uuid)
    const subject = subjectOf(uuid, team, clientIpKey)
    for (const r of classRates[cls]) {
      charges.push({
        key: storeKeys.cls(subject, cls, r.windowMs),
        limit: r.limit,
        windowMs: r.windowMs,
        kind: 'class',
        cls,
      })
    }
    for (const rule of rules) {
      if (rule.methods !== null && !rule.methods.has(method)) continue
      if (!rule.re.test(path)) continue
      for (const r of rule.limits) {
        charges.push({
          key: storeKeys.rule(subject, rule.name, r.windowMs),
          limit: r.limit,
          windowMs: r.windowMs,
          kind: 'rule',
          cls,
          rule: rule.name,
        })
      }
    }
    // SPEC §3: the ceiling follows the client across every base it touches.
    if (cls !== 'other') {
      for (const r of ipCeiling) {
        charges.push({
          key: storeKeys.ipCeiling(clientIpKey, r.windowMs),
          limit: r.limit,
          windowMs: r.windowMs,
          kind: 'ip_ceiling',
          cls,
        })
      }
    }
    // SPEC §5: base and account calls on a team's base are charged to the team's month.
    if (team !== undefined && (cls === 'base' || cls === 'account'))
      charges.push(monthlyCharge(team, cls, nowMs))
    const emitHeaders =
      charges.length > 0 && (headers === 'all' || (headers === 'gateway' && cls === 'base'))
    return { cls, key, charges, emitHeaders }
  }

  function windowsOfBase(uuid: string, nowMs: number): Charge[] {
    const team = teamOf(uuid)
    const subject = subjectOf(uuid, team, '')
    const out: Charge[] = []
    for (const cls of ['base', 'account'] as const) {
      for (const r of classRates[cls])
        out.push({
          key: storeKeys.cls(subject, cls, r.windowMs),
          limit: r.limit,
          windowMs: r.windowMs,
          kind: 'class',
          cls,
        })
    }
    for (const rule of rules) {
      for (const r of rule.limits) {
        out.push({
          key: storeKeys.rule(subject, rule.name, r.windowMs),
          limit: r.limit,
          windowMs: r.windowMs,
          kind: 'rule',
          cls: 'base',
          rule: rule.name,
        })
      }
    }
    if (team !== undefined) out.push(monthlyCharge(team, 'base', nowMs))
    return out
  }

  function windowsOfIp(ipKey: string): Charge[] {
    const subject = subjectOf(null, undefined, ipKey)
    const out: Charge[] = []
    for (const cls of ['auth_token', 'base', 'account', 'other'] as const) {
      for (const r of classRates[cls])
        out.push({
          key: storeKeys.cls(subject, cls, r.windowMs),
          limit: r.limit,
          windowMs: r.windowMs,
          kind: 'class',
          cls,
        })
    }
    for (const rule of rules) {
      for (const r of rule.limits) {
        out.push({
          key: storeKeys.rule(subject, rule.name, r.windowMs),
          limit: r.limit,
          windowMs: r.windowMs,
          kind: 'rule',
          cls: 'other',
          rule: rule.name,
        })
      }
    }
    for (const r of ipCeiling)
      out.push({
        key: storeKeys.ipCeiling(ipKey, r.windowMs),
        limit: r.limit,
        windowMs: r.windowMs,
        kind: 'ip_ceiling',
        cls: 'other',
      })
    return out
  }

  return {
    classify,
    windowsOfBase,
    windowsOfIp,
    teamOf,
    monthlyChargeOf: (team, nowMs) => monthlyCharge(team, 'base', nowMs),
  }
}
