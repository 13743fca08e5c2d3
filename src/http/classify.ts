import { keys } from '../limiter/keys.js'
import { createMonthClock } from '../quota/month.js'
import type { Team } from '../quota/teams.js'
import type {
  Charge,
  Classification,
  Config,
  MonthlyCharge,
  RateList,
  LimitedClass,
  RequestClass,
  RuleConfig,
} from '../types.js'
import { baseUuidOfPath } from './base-uuid.js'
import { compilePathPattern } from './path-pattern.js'

// SPEC §3, compiled once per configuration: the per-request work is a few string compares,
// one scan of the path's segments for a UUID, and the rules' regexes.

const AUTH_TOKEN_PATH = '/api2/auth-token'
/** The gateway, and the pre-5.3 base servers (SPEC §3 as changed on 2026-11-23). */
const BASE_PREFIXES = ['/api-gateway/', '/dtable-server/', '/dtable-db/']
const ACCOUNT_PREFIXES = ['/api/v2.1/', '/api2/', '/api/v1/']

const NO_RULES: readonly never[] = []

interface CompiledRule {
  name: string
  methods: ReadonlySet<string> | null
  re: RegExp
  limits: RateList
  dryRun: boolean
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
  monthlyChargeOf(team: Team, nowMs: number): MonthlyCharge
}

function wholePath(lowerPath: string): string {
  return lowerPath.length > 1 && lowerPath.endsWith('/') ? lowerPath.slice(0, -1) : lowerPath
}

/** SPEC §3 classes, in matching order (the path already lower-cased). */
export function compileClassOf(
  exemptPaths: readonly string[]
): (lowerPath: string) => RequestClass {
  const exempt = new Set(exemptPaths.map((p) => wholePath(p.toLowerCase())))
  return (lowerPath) => {
    const whole = wholePath(lowerPath)
    if (exempt.has(whole)) return 'exempt'
    if (whole === AUTH_TOKEN_PATH) return 'auth_token'
    for (const prefix of BASE_PREFIXES) if (lowerPath.startsWith(prefix)) return 'base'
    for (const prefix of ACCOUNT_PREFIXES) if (lowerPath.startsWith(prefix)) return 'account'
    return 'other'
  }
}

function compileRule(r: RuleConfig): CompiledRule {
  return {
    name: r.name,
    methods: r.methods ? new Set(r.methods) : null,
    re: compilePathPattern(r.path),
    limits: r.limits,
    dryRun: r.mode === 'dry-run',
  }
}

/** What one request (or one usage query) is charged for, before the monthly window. */
interface ChargeSpec {
  subject: string
  cls: RequestClass
  classes: readonly LimitedClass[]
  rules: readonly CompiledRule[]
  /** Set when the client's ceiling applies. */
  ipKey: string | null
}

/** The limits a snapshot charges: per class, and the client's ceiling. */
interface Rates {
  classRates: Record<LimitedClass, RateList>
  ipCeiling: RateList
}

/** The one charge builder: class windows, rule windows, the ceiling. */
function buildCharges(spec: ChargeSpec, rates: Rates): Charge[] {
  const out: Charge[] = []
  for (const cls of spec.classes) {
    for (const r of rates.classRates[cls]) {
      const key = keys.cls(spec.subject, cls, r.windowMs)
      out.push({ kind: 'class', key, limit: r.limit, windowMs: r.windowMs, cls })
    }
  }
  for (const rule of spec.rules) {
    for (const r of rule.limits) {
      const key = keys.rule(spec.subject, rule.name, r.windowMs)
      const { name, dryRun } = rule
      out.push({
        kind: 'rule',
        key,
        limit: r.limit,
        windowMs: r.windowMs,
        cls: spec.cls,
        rule: name,
        dryRun,
      })
    }
  }
  if (spec.ipKey !== null) {
    for (const r of rates.ipCeiling) {
      const key = keys.ipCeiling(spec.ipKey, r.windowMs)
      out.push({ kind: 'ip_ceiling', key, limit: r.limit, windowMs: r.windowMs, cls: spec.cls })
    }
  }
  return out
}

/** A team's month as a charge; the quota is the team's, whatever class charged it. */
function monthlyCharge(
  team: Team,
  month: { id: string; endMs: number },
  cls: RequestClass
): MonthlyCharge {
  return {
    kind: 'monthly',
    key: keys.teamMonth(team.id, month.id),
    limit: team.quota,
    cls,
    endMs: month.endMs,
    limitKey: keys.teamOverride(team.id),
    team: team.id,
  }
}

export function compileClassifier(
  config: Config,
  teams: ReadonlyMap<string, Team> = new Map()
): Classifier {
  const classOf = compileClassOf(config.exempt)
  const classRates: Record<LimitedClass, RateList> = {
    auth_token: config.rateLimits.authToken,
    base: config.rateLimits.base,
    account: config.rateLimits.account,
    other: config.rateLimits.other,
  }
  const rules = config.rateLimits.rules.filter((r) => r.limits.length > 0).map(compileRule)
  const ipCeiling = config.rateLimits.ipCeiling
  const headers = config.headers
  const monthOf = createMonthClock(config.monthly.timezone)
  const allowBases = new Set(config.allow.bases)
  const teamOf = (uuid: string) => (config.monthly.enabled ? teams.get(uuid) : undefined)

  const monthlyChargeOf = (team: Team, nowMs: number, cls: RequestClass = 'base') =>
    monthlyCharge(team, monthOf(nowMs), cls)
  const rates: Rates = { classRates, ipCeiling }
  const build = (spec: ChargeSpec) => buildCharges(spec, rates)

  function classify(
    method: string,
    path: string,
    clientIpKey: string,
    nowMs: number
  ): Classification {
    const cls = classOf(path.toLowerCase())
    const uuid = baseUuidOfPath(path)
    const key = uuid !== null ? `base:${uuid}` : `ip:${clientIpKey}`
    if (cls === 'exempt' || (uuid !== null && allowBases.has(uuid))) {
      return { cls, key, charges: [], emitHeaders: false }
    }
    // Most deployments have no rules: no array built per call then.
    const matched =
      rules.length === 0
        ? NO_RULES
        : rules.filter((r) => (r.methods === null || r.methods.has(method)) && r.re.test(path))
    const charges = build({
      subject: keys.subject(uuid, clientIpKey),
      cls,
      classes: [cls],
      rules: matched,
      // SPEC §3: the ceiling follows the client across every base it touches.
      ipKey: cls === 'other' ? null : clientIpKey,
    })
    // SPEC §5: base and account calls on a team's base are charged to the team's month.
    const team = uuid === null ? undefined : teamOf(uuid)
    if (team !== undefined && (cls === 'base' || cls === 'account')) {
      charges.push(monthlyChargeOf(team, nowMs, cls))
    }
    const emitHeaders =
      charges.length > 0 && (headers === 'all' || (headers === 'gateway' && cls === 'base'))
    return { cls, key, charges, emitHeaders }
  }

  function windowsOfBase(uuid: string, nowMs: number): Charge[] {
    const subject = keys.subject(uuid, '')
    const out = build({ subject, cls: 'base', classes: ['base', 'account'], rules, ipKey: null })
    const team = teamOf(uuid)
    if (team !== undefined) out.push(monthlyChargeOf(team, nowMs))
    return out
  }

  function windowsOfIp(ipKey: string): Charge[] {
    const subject = keys.subject(null, ipKey)
    const classes = ['auth_token', 'base', 'account', 'other'] as const
    return build({ subject, cls: 'other', classes, rules, ipKey })
  }

  return {
    classify,
    windowsOfBase,
    windowsOfIp,
    teamOf,
    monthlyChargeOf: (team, nowMs) => monthlyChargeOf(team, nowMs),
  }
}
