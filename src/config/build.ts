import ipaddr from 'ipaddr.js'
import { checkCidrs } from '../request/client-ip.js'
import type {
  Config,
  ConfigProblem,
  MonthlyConfig,
  PlanConfig,
  ProtectConfig,
  QueuedClass,
  RuleConfig,
  SizeLimits,
} from '../types.js'
import { checkedRates } from '../limiter/rate.js'
import { storeKindOf } from '../limiter/redis-client.js'
import { DEFAULTS as D } from './defaults.js'
import { DEFAULT_PLANS, PRESETS } from './presets.js'
import { QUEUED_CLASSES, shareValue, type LimitsFile } from './schema.js'
import { uuids } from '../request/base-uuid.js'
import { parseVersion } from '../history/version.js'
import { buildOverrides } from '../overrides/build.js'

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true
  if (!ipaddr.isValid(host)) return false
  return ipaddr.process(host).range() === 'loopback'
}

function checkUrl(
  problems: ConfigProblem[],
  field: string,
  value: string,
  schemes: readonly string[]
): void {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    problems.push({ field, message: `${JSON.stringify(value)} is not a URL` })
    return
  }
  if (!schemes.includes(url.protocol)) {
    problems.push({
      field,
      message: `${JSON.stringify(value)} must start with ${schemes.map((s) => s + '//').join(' or ')}`,
    })
  }
}

/**
 * The file with its static defaults filled in, section by section: the builders below read
 * each value once, and every default is written once (config/defaults.ts).
 */
function filled(file: LimitsFile) {
  return {
    deployment: file.deployment ?? D.deployment,
    workers: file.workers ?? D.workers,
    listen: { ...D.listen, ...file.listen },
    admin: { ...D.admin, ...file.admin },
    upstream: { ...D.upstream, ...file.upstream },
    store: { ...D.store, ...file.store },
    usage: { ...D.usage, ...file.usage },
    client_ip: { ...D.client_ip, ...file.client_ip },
    size_limits: { ...D.size_limits, ...file.size_limits },
    history: { ...D.history, ...file.history },
    protect: { ...D.protect, ...file.protect },
    charge: { ...D.charge, ...file.charge },
    delay_ms: file.rate_limits?.delay_ms ?? D.rate_limits.delay_ms,
    server: { ...D.server, ...file.server },
    monthly_timezone: file.monthly?.timezone ?? D.monthly.timezone,
    ip_ceiling: file.rate_limits?.ip_ceiling ?? D.rate_limits.ip_ceiling,
    headers: file.headers ?? D.headers,
    header_style: file.header_style ?? D.header_style,
    mode: file.mode ?? D.mode,
    exempt: file.exempt ?? D.exempt,
  }
}

type Filled = ReturnType<typeof filled>

function buildStore(problems: ConfigProblem[], f: Filled): Config['store'] {
  const { url, cluster } = f.store
  if (url !== '') checkUrl(problems, 'store.url', url, ['redis:', 'rediss:'])
  cluster.forEach((u, i) => checkUrl(problems, `store.cluster[${i}]`, u, ['redis:', 'rediss:']))
  if (url !== '' && cluster.length > 0) {
    problems.push({ field: 'store', message: 'set either url or cluster, not both' })
  }
  return {
    url,
    cluster,
    prefix: f.store.prefix,
    timeoutMs: f.store.timeout_ms,
    onError: f.store.on_error,
    leases: f.store.leases,
    memoryKeys: f.store.memory_keys,
  }
}

function buildRules(problems: ConfigProblem[], file: LimitsFile): RuleConfig[] {
  const names = new Set<string>()
  return (file.rate_limits?.rules ?? []).map((r, i) => {
    if (names.has(r.name)) {
      problems.push({
        field: `rate_limits.rules[${i}].name`,
        message: `${JSON.stringify(r.name)} is used by another rule`,
      })
    }
    names.add(r.name)
    const star = r.path.indexOf('*')
    if (star !== -1 && star !== r.path.length - 1) {
      problems.push({
        field: `rate_limits.rules[${i}].path`,
        message: '* is allowed only at the end',
      })
    }
    const methods =
      r.method === undefined
        ? null
        : (Array.isArray(r.method) ? r.method : [r.method]).map((m) => m.toUpperCase())
    return {
      name: r.name,
      methods,
      path: r.path,
      limits: checkedRates(problems, `rate_limits.rules[${i}].limits`, r.limits),
      mode: r.mode ?? 'enforce',
    }
  })
}

function buildListeners(problems: ConfigProblem[], f: Filled): Pick<Config, 'listen' | 'admin'> {
  const { host: adminHost, token: adminToken, port: adminPort } = f.admin
  // Issue #25: an unfilled env.example under compose 1.x made the comment text the token.
  if (/\s|^#/.test(adminToken)) {
    problems.push({
      field: 'admin.token',
      message:
        'looks like a placeholder (it has white space or starts with #); set a secret, e.g. `openssl rand -hex 24`',
    })
  }
  if (adminToken === '' && !isLoopback(adminHost)) {
    // SPEC §7: without a token the admin listener binds only to loopback.
    problems.push({
      field: 'admin.host',
      message: `${JSON.stringify(adminHost)} is not loopback; set admin.token to listen there`,
    })
  }
  const listenPort = f.listen.port
  if (adminPort !== 0 && adminPort === listenPort) {
    // SPEC §7: the admin listener is never the proxy port.
    problems.push({
      field: 'admin.port',
      message: `${adminPort} is the proxy's port (listen.port); the admin listener needs its own`,
    })
  }
  return {
    listen: {
      host: f.listen.host,
      port: listenPort,
      headersTimeoutMs: f.listen.headers_timeout_ms,
      requestTimeoutMs: f.listen.request_timeout_ms,
      keepaliveTimeoutMs: f.listen.keepalive_timeout_ms,
      maxConnections: f.listen.max_connections,
      maxConnectionsPerClient: f.listen.max_connections_per_client,
      tls:
        f.listen.tls === undefined
          ? null
          : { certFile: f.listen.tls.cert_file, keyFile: f.listen.tls.key_file },
    },
    admin: { host: adminHost, port: adminPort, token: adminToken },
  }
}

function buildMonthly(problems: ConfigProblem[], file: LimitsFile, f: Filled): MonthlyConfig {
  const { deployment, monthly_timezone: timezone } = f
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone })
  } catch {
    problems.push({
      field: 'monthly.timezone',
      message: `${JSON.stringify(timezone)} is not a time zone`,
    })
  }
  // No prototype: a plan named `__proto__` or `toString` is looked up as data, never inherited.
  const plans: Record<string, PlanConfig> = Object.assign(Object.create(null), DEFAULT_PLANS)
  for (const [name, p] of Object.entries(file.monthly?.plans ?? {})) {
    plans[name] = p.calls !== undefined ? { calls: p.calls } : { callsPerUser: p.calls_per_user! }
  }
  const teamIds = new Set<string>()
  const teams = (file.monthly?.teams ?? []).map((t, i) => {
    if (teamIds.has(t.id))
      problems.push({
        field: `monthly.teams[${i}].id`,
        message: `${JSON.stringify(t.id)} is used by another team`,
      })
    teamIds.add(t.id)
    if (!(t.plan in plans))
      problems.push({
        field: `monthly.teams[${i}].plan`,
        message: `${JSON.stringify(t.plan)} is not a plan (the plans: ${Object.keys(plans).join(', ') || 'none'})`,
      })
    const bases = uuids(problems, `monthly.teams[${i}].bases`, t.bases)
    return { id: t.id, plan: t.plan, users: t.users, bases }
  })
  return { enabled: file.monthly?.enabled ?? deployment === 'cloud', timezone, plans, teams }
}

function buildSizeLimits(f: Filled): SizeLimits {
  const sl = f.size_limits
  return {
    listRows: sl.list_rows,
    appendRows: sl.append_rows,
    updateRows: sl.update_rows,
    deleteRows: sl.delete_rows,
    sqlList: sl.sql_list,
    maxBodyBytes: sl.max_body_bytes,
    bufferBytes: sl.buffer_bytes,
    spillBytes: sl.spill_bytes,
    bodyTimeoutMs: sl.body_timeout_ms,
    clientShare: shareValue(sl.client_share) ?? 1 / 8,
    clientShareText: String(sl.client_share),
    minBodyRate: sl.min_body_rate,
  }
}

/** The upstream pool and one client's part of it (SPEC §4: 1/8 of the pool by default). */
function buildUpstream(problems: ConfigProblem[], f: Filled): Config['upstream'] {
  const u = f.upstream
  const perClient = u.max_connections_per_client ?? Math.max(1, Math.floor(u.max_connections / 8))
  if (perClient > u.max_connections)
    problems.push({
      field: 'upstream.max_connections_per_client',
      message: `${perClient} is above upstream.max_connections (${u.max_connections})`,
    })
  return {
    url: u.url,
    timeoutMs: u.timeout_ms,
    maxConnections: u.max_connections,
    maxConnectionsPerClient: perClient,
    bufferRequestBytes: u.buffer_request_bytes,
    bufferResponseBytes: u.buffer_response_bytes,
    tunnelIdleMs: u.tunnel_idle_ms,
    maxTunnels: u.max_tunnels ?? Math.max(1, Math.floor(u.max_connections / 2)),
  }
}

/** SPEC §9: the ceiling, its queue order and one key's share, checked against each other. */
function buildProtect(problems: ConfigProblem[], f: Filled): ProtectConfig {
  const p = f.protect
  const given = p.priority as QueuedClass[]
  const seen = new Set<QueuedClass>()
  given.forEach((c, i) => {
    if (seen.has(c))
      problems.push({
        field: `protect.priority[${i}]`,
        message: `${JSON.stringify(c)} is listed twice`,
      })
    seen.add(c)
  })
  // Classes left out wait after the listed ones, in the default order.
  const priority = [...seen, ...QUEUED_CLASSES.filter((c) => !seen.has(c))]
  const max = p.max_in_flight === 'unlimited' ? Infinity : p.max_in_flight
  const key = p.key_in_flight === 'unlimited' ? Infinity : p.key_in_flight
  if (typeof max === 'number' && key !== Infinity && key > max)
    problems.push({
      field: 'protect.key_in_flight',
      message: `${key} is above protect.max_in_flight (${max}): one key could never use its share`,
    })
  return {
    maxInFlight: max,
    minInFlight: p.min_in_flight,
    queueMs: p.queue_ms,
    priority,
    keyInFlight: key,
  }
}

/**
 * Worker processes share counters only through a shared store: with the in-memory store each
 * would count alone and admit up to N times a limit (SPEC §3's bound). Sharing a memory store
 * over IPC would put a round trip to the primary on every call, which is what Redis is for.
 * `auto` is refused too, so a file valid on a one-core laptop is not refused on a server.
 */
function buildWorkers(
  problems: ConfigProblem[],
  f: Filled,
  store: Config['store']
): number | 'auto' {
  const workers = f.workers
  if (storeKindOf(store) === 'memory' && workers !== 1)
    problems.push({
      field: 'workers',
      message: `${JSON.stringify(workers)} needs a shared store (store.url or store.cluster): with the in-memory store each worker would count alone`,
    })
  return workers
}

/** Cross-field checks and preset merging: a valid document becomes a Config, or problems. */
export function buildConfig(file: LimitsFile): { config?: Config; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = []
  const f = filled(file)
  const deployment = f.deployment
  const preset = PRESETS[deployment]
  const rl = file.rate_limits ?? {}
  const upstreamUrl = f.upstream.url
  checkUrl(problems, 'upstream.url', upstreamUrl, ['http:', 'https:'])
  const trusted = f.client_ip.trusted_proxies
  checkCidrs(problems, 'client_ip.trusted_proxies', trusted)
  const allowClients = file.allow?.clients ?? []
  checkCidrs(problems, 'allow.clients', allowClients)
  const allowBases = uuids(problems, 'allow.bases', file.allow?.bases ?? [])
  const store = buildStore(problems, f)
  const monthly = buildMonthly(problems, file, f)
  const config: Config = {
    deployment,
    workers: buildWorkers(problems, f, store),
    ...buildListeners(problems, f),
    upstream: buildUpstream(problems, f),
    store,
    clientIp: { trustedProxies: trusted, ipv6Prefix: f.client_ip.ipv6_prefix },
    rateLimits: {
      account: checkedRates(problems, 'rate_limits.account', rl.account ?? preset.account),
      base: checkedRates(problems, 'rate_limits.base', rl.base ?? preset.base),
      authToken: checkedRates(
        problems,
        'rate_limits.auth_token',
        rl.auth_token ?? preset.auth_token
      ),
      other: checkedRates(problems, 'rate_limits.other', rl.other ?? preset.other),
      rules: buildRules(problems, file),
      ipCeiling: checkedRates(problems, 'rate_limits.ip_ceiling', f.ip_ceiling),
      delayMs: f.delay_ms,
    },
    protect: buildProtect(problems, f),
    charge: { serverErrors: f.charge.server_errors },
    headers: f.headers,
    headerStyle: f.header_style,
    mode: f.mode,
    exempt: f.exempt,
    allow: { clients: allowClients, bases: allowBases },
    sizeLimits: buildSizeLimits(f),
    usage: { keepAfter: f.usage.keep_after },
    monthly,
    overrides: buildOverrides(problems, file.overrides ?? [], monthly.teams),
    server: { version: parseVersion(f.server.version) ?? 'auto' },
    history: { removed: f.history.removed, deprecationHeaders: f.history.deprecation_headers },
  }
  return problems.length > 0 ? { problems } : { config, problems }
}

/** The methods a request can have (RFC 9110 and PATCH); a rule naming another never matches. */
const METHODS = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'PATCH',
  'OPTIONS',
  'CONNECT',
  'TRACE',
])

/**
 * Issue #25: rules that can never match, as warnings (`check` prints them, a start or reload
 * logs them): a `{placeholder}` other than `{base_uuid}` is read as literal text, and a method
 * no request has matches nothing.
 */
export function ruleWarnings(config: Config): ConfigProblem[] {
  const out: ConfigProblem[] = []
  config.rateLimits.rules.forEach((r, i) => {
    for (const m of r.path.matchAll(/\{([^}]*)\}/g)) {
      if (m[1] !== 'base_uuid')
        out.push({
          field: `rate_limits.rules[${i}].path`,
          message: `{${m[1]}} is not a placeholder (only {base_uuid} is): it matches only that literal text, so the rule never matches`,
        })
    }
    for (const m of r.methods ?? []) {
      if (!METHODS.has(m))
        out.push({
          field: `rate_limits.rules[${i}].method`,
          message: `${JSON.stringify(m)} is not an HTTP method a request can have: the rule never matches it`,
        })
    }
  })
  return out
}
