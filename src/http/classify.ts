import { keys } from '../limiter/keys.js'
import { createDayClock, createMonthClock } from '../quota/month.js'
import { NO_OVERRIDES, type OverrideHit, type OverrideLookup } from '../overrides/lookup.js'
import type { Team } from '../quota/teams.js'
import type {
  Charge,
  Classification,
  Config,
  MonthlyCharge,
  OverrideConfig,
  RateList,
  LimitedClass,
  RequestClass,
  RuleConfig,
} from '../types.js'
import { baseUuidOfPath } from '../request/base-uuid.js'
import { compilePathPattern } from '../request/path-pattern.js'
import { MEMO_KEY_MAX } from '../request/memo.js'

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
  classify(
    method: string,
    path: string,
    clientIpKey: string,
    nowMs: number,
    /** The client's address, for overrides naming `clients` (the key is its IPv6 /prefix). */
    clientIp?: string
  ): Classification
  /** Every window counted on a base's key, whatever the path (for the usage API). */
  windowsOfBase(uuid: string, nowMs: number): Charge[]
  /** Every window counted on a client's key (for the usage API). */
  windowsOfIp(ipKey: string, ip?: string): Charge[]
  /** SPEC §10: the override that applies to a base's calls (or a client's), if any. */
  overrideOf(uuid: string | null, clientIp: string): OverrideConfig | null
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
  /** SPEC §10: the override that applies to the call's key, and the team a shared one counts. */
  override?: OverrideHit | null
}

/** The limits a snapshot charges: per class, and the client's ceiling. */
interface Rates {
  classRates: Record<LimitedClass, RateList>
  ipCeiling: RateList
}

/**
 * A class's windows. SPEC §10: an enforced override names the limits in place of the class's
 * (a shared team override counts them under the team); a dry-run one leaves the class's and
 * adds its own as dry-run windows beside them, which log and never refuse.
 */
function classCharges(out: Charge[], spec: ChargeSpec, cls: LimitedClass, rates: Rates): void {
  const ov = spec.override ?? null
  const own = ov === null ? undefined : ov.o.limits[cls]
  if (ov === null || own === undefined) {
    for (const r of rates.classRates[cls]) {
      const key = keys.cls(spec.subject, cls, r.windowMs)
      out.push({ kind: 'class', key, limit: r.limit, windowMs: r.windowMs, cls })
    }
    return
  }
  const { o, teamId } = ov
  const subject = o.shared && teamId !== undefined ? keys.teamSubject(teamId) : spec.subject
  const dryRun = o.mode === 'dry-run'
  if (dryRun) classCharges(out, { ...spec, override: null }, cls, rates)
  for (const r of own) {
    const { limit, windowMs } = r
    if (dryRun) {
      const key = keys.rule(subject, `override.${o.name}.${cls}`, windowMs)
      out.push({ kind: 'rule', key, limit, windowMs, cls, rule: o.name, dryRun: true })
    } else {
      const key = keys.cls(subject, cls, windowMs)
      out.push({ kind: 'class', key, limit, windowMs, cls, override: o.name })
    }
  }
}

/** The one charge builder: class windows, rule windows, the ceiling. */
function buildCharges(spec: ChargeSpec, rates: Rates): Charge[] {
  const out: Charge[] = []
  for (const cls of spec.classes) classCharges(out, spec, cls, rates)
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
  day: string,
  cls: RequestClass
): MonthlyCharge {
  return {
    kind: 'monthly',
    key: keys.ledger(team.id, month.id),
    limit: team.quota,
    cls,
    endMs: month.endMs,
    day,
    month: month.id,
    quotaKey: keys.teamChange(team.id),
    team: team.id,
  }
}

/** The rules a call matches (most deployments have none: no array built per call then). */
function matchRules(rules: readonly CompiledRule[], method: string, path: string) {
  if (rules.length === 0) return NO_RULES
  return rules.filter((r) => (r.methods === null || r.methods.has(method)) && r.re.test(path))
}

function classRatesOf(config: Config): Record<LimitedClass, RateList> {
  const r = config.rateLimits
  return { auth_token: r.authToken, base: r.base, account: r.account, other: r.other }
}

/** SPEC §10: the override of a call's key (null when none is configured or none names it). */
function overrideFinder(overrides: OverrideLookup) {
  return (uuid: string | null, clientIp: string): ChargeSpec['override'] =>
    overrides.any ? overrides.find(uuid, clientIp) : null
}

/** A team's month as a charge at a time: both clocks keep their answer until it ends. */
function monthlyCharger(timeZone: string) {
  const monthOf = createMonthClock(timeZone)
  const dayOf = createDayClock(timeZone)
  return (team: Team, nowMs: number, cls: RequestClass = 'base') =>
    monthlyCharge(team, monthOf(nowMs), dayOf(nowMs).id.slice(8), cls)
}

/** Classifications kept per method (SPEC §12: a path seen again costs one map lookup). */
const MEMO_PATHS = 8192

/**
 * The classifier's `classify`, its client-independent answers kept per method and path
 * (immutable: a team's month, which changes with the day, is added per call by `withMonth`).
 */
function memoized(
  plan: (method: string, path: string, clientIpKey: string, clientIp: string) => Planned,
  byClient: boolean,
  withMonth: (p: Planned, nowMs: number) => Classification
): Classifier['classify'] {
  const memo = new Map<string, Map<string, Planned>>()
  let memoSize = 0
  return (method, path, clientIpKey, nowMs, clientIp = clientIpKey) => {
    let byPath = memo.get(method)
    const known = byPath?.get(path)
    if (known !== undefined) return withMonth(known, nowMs)
    const p = plan(method, path, clientIpKey, clientIp)
    if (!byClient && p.c.key.charCodeAt(0) === 98 /* b: base */ && path.length <= MEMO_KEY_MAX) {
      if (memoSize >= MEMO_PATHS) {
        memo.clear()
        memoSize = 0
      }
      if (byPath === undefined) memo.set(method, (byPath = new Map()))
      byPath.set(path, p)
      memoSize++
    }
    return withMonth(p, nowMs)
  }
}

/** A call's classification without its month, and the team whose month it is charged to. */
interface Planned {
  c: Classification
  month: Team | undefined
}

/** What a classification reads of the snapshot (compiled once by compileClassifier). */
interface PlanContext {
  classOf: (lowerPath: string) => RequestClass
  rules: readonly CompiledRule[]
  allowBases: ReadonlySet<string>
  teams: ReadonlyMap<string, Team>
  teamOf: (uuid: string) => Team | undefined
  build: (spec: ChargeSpec) => Charge[]
  overrideOf: (uuid: string | null, clientIp: string) => ChargeSpec['override']
  headerRule: (cls: RequestClass) => boolean
}

/** A call's classification without a team's month, and the team whose month it is charged to. */
function planner(x: PlanContext) {
  return (method: string, path: string, clientIpKey: string, clientIp: string): Planned => {
    const cls = x.classOf(path.toLowerCase())
    const uuid = baseUuidOfPath(path)
    const key = uuid !== null ? `base:${uuid}` : `ip:${clientIpKey}`
    // SPEC §5 usage over time: the base's team, monthly quotas on or not.
    const teamId = uuid === null ? undefined : x.teams.get(uuid)?.id
    if (cls === 'exempt' || (uuid !== null && x.allowBases.has(uuid))) {
      return { c: { cls, key, charges: [], emitHeaders: false, team: teamId }, month: undefined }
    }
    const charges = x.build({
      subject: keys.subject(uuid, clientIpKey),
      cls,
      classes: [cls],
      rules: matchRules(x.rules, method, path),
      // SPEC §3: the ceiling follows the client across every base it touches.
      ipKey: cls === 'other' ? null : clientIpKey,
      override: x.overrideOf(uuid, clientIp),
    })
    const emitHeaders = charges.length > 0 && x.headerRule(cls)
    // SPEC §5: base and account calls on a team's base are charged to the team's month.
    const team = uuid === null ? undefined : x.teamOf(uuid)
    const month = team !== undefined && (cls === 'base' || cls === 'account') ? team : undefined
    return { c: { cls, key, charges, emitHeaders, team: teamId }, month }
  }
}

export function compileClassifier(
  config: Config,
  teams: ReadonlyMap<string, Team> = new Map(),
  overrides: OverrideLookup = NO_OVERRIDES
): Classifier {
  const classOf = compileClassOf(config.exempt)
  const rules = config.rateLimits.rules.filter((r) => r.limits.length > 0).map(compileRule)
  const ipCeiling = config.rateLimits.ipCeiling
  const headers = config.headers
  const allowBases = new Set(config.allow.bases)
  const teamOf = (uuid: string) => (config.monthly.enabled ? teams.get(uuid) : undefined)
  const monthlyChargeOf = monthlyCharger(config.monthly.timezone)
  const rates: Rates = { classRates: classRatesOf(config), ipCeiling }
  const build = (spec: ChargeSpec) => buildCharges(spec, rates)
  const overrideOf = overrideFinder(overrides)

  const headerRule = (cls: RequestClass) =>
    headers === 'all' || (headers === 'gateway' && cls === 'base')
  // SPEC §12: a call keyed on its base, with no window of its client (no ip_ceiling, no
  // override naming clients), is classified the same way whoever sends it.
  const byClient = ipCeiling.length > 0 || overrides.all.some((o) => o.clients.length > 0)
  const plan = planner({ classOf, rules, allowBases, teams, teamOf, build, overrideOf, headerRule })
  const classify = memoized(plan, byClient, (p, nowMs) => {
    // SPEC §5: base and account calls on a team's base are charged to the team's month.
    const { c, month } = p
    if (month === undefined) return c
    const charges = [...c.charges, monthlyChargeOf(month, nowMs, c.cls)]
    return { ...c, charges, emitHeaders: headerRule(c.cls) }
  })

  function windowsOfBase(uuid: string, nowMs: number): Charge[] {
    const subject = keys.subject(uuid, '')
    const classes = ['base', 'account'] as const
    const override = overrideOf(uuid, '')
    const out = build({ subject, cls: 'base', classes, rules, ipKey: null, override })
    const team = teamOf(uuid)
    if (team !== undefined) out.push(monthlyChargeOf(team, nowMs))
    return out
  }

  function windowsOfIp(ipKey: string, ip: string = ipKey): Charge[] {
    const subject = keys.subject(null, ipKey)
    const classes = ['auth_token', 'base', 'account', 'other'] as const
    return build({ subject, cls: 'other', classes, rules, ipKey, override: overrideOf(null, ip) })
  }

  return {
    classify,
    windowsOfBase,
    windowsOfIp,
    teamOf,
    monthlyChargeOf: (team, nowMs) => monthlyChargeOf(team, nowMs),
    overrideOf: (uuid, clientIp) => overrideOf(uuid, clientIp)?.o ?? null,
  }
}
