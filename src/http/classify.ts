import type { Charge, Classification, Config, RateList, RequestClass, RuleConfig } from '../types.js'
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
  classify(method: string, path: string, clientIpKey: string): Classification
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
 * Store keys. The part in braces is a Redis Cluster hash tag: every window of one subject
 * (a base or a client IP) lands in one slot, so the class and rule windows of a request can
 * be checked by one script on one node.
 */
export const storeKeys = {
  cls: (subject: string, cls: RequestClass, windowMs: number) => `{${subject}}:${cls}:${windowMs}`,
  rule: (subject: string, rule: string, windowMs: number) => `{${subject}}:rule:${rule}:${windowMs}`,
  ipCeiling: (ipKey: string, windowMs: number) => `{ip:${ipKey}}:ceiling:${windowMs}`,
}

export function compileClassifier(config: Config): Classifier {
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

  function classOf(lowerPath: string): RequestClass {
    const whole = wholePath(lowerPath)
    if (exempt.has(whole)) return 'exempt'
    if (whole === AUTH_TOKEN_PATH) return 'auth_token'
    if (lowerPath.startsWith(BASE_PREFIX)) return 'base'
    for (const prefix of ACCOUNT_PREFIXES) if (lowerPath.startsWith(prefix)) return 'account'
    return 'other'
  }

  function classify(method: string, path: string, clientIpKey: string): Classification {
    const lowerPath = path.toLowerCase()
    const cls = classOf(lowerPath)
    const uuid = baseUuidOfPath(path)
    const key = uuid !== null ? `base:${uuid}` : `ip:${clientIpKey}`
    const charges: Charge[] = []
    if (cls === 'exempt') return { cls, key, charges, emitHeaders: false }

    const subject = uuid !== null ? `b:${uuid}` : `ip:${clientIpKey}`
    for (const r of classRates[cls]) {
      charges.push({ key: storeKeys.cls(subject, cls, r.windowMs), limit: r.limit, windowMs: r.windowMs, kind: 'class', cls })
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
        charges.push({ key: storeKeys.ipCeiling(clientIpKey, r.windowMs), limit: r.limit, windowMs: r.windowMs, kind: 'ip_ceiling', cls })
      }
    }
    const emitHeaders =
      charges.length > 0 && (headers === 'all' || (headers === 'gateway' && cls === 'base'))
    return { cls, key, charges, emitHeaders }
  }

  return { classify }
}
