import { MASK, maskUrl } from '../mask-url.js'
import type { Config, RateList } from '../types.js'
import { overrideJson } from '../overrides/view.js'

/**
 * The running configuration in the file's own shape and snake_case names, secrets masked: what
 * GET /v1/config answers and what a reload's log line compares (issue #25).
 */
export function configView(config: Config): Record<string, unknown> {
  const rates = (list: RateList) => list.map((r) => r.text)
  const { listen, admin, clientIp, rateLimits, sizeLimits, monthly } = config
  return {
    deployment: config.deployment,
    workers: config.workers,
    listen: {
      host: listen.host,
      port: listen.port,
      headers_timeout_ms: listen.headersTimeoutMs,
      request_timeout_ms: listen.requestTimeoutMs,
      keepalive_timeout_ms: listen.keepaliveTimeoutMs,
      max_connections: listen.maxConnections,
      max_connections_per_client: listen.maxConnectionsPerClient,
      tls:
        listen.tls === null
          ? null
          : { cert_file: listen.tls.certFile, key_file: listen.tls.keyFile },
    },
    admin: { host: admin.host, port: admin.port, token: admin.token === '' ? '' : MASK },
    ...backendViews(config),
    usage: { keep_after: config.usage.keepAfter },
    client_ip: { trusted_proxies: clientIp.trustedProxies, ipv6_prefix: clientIp.ipv6Prefix },
    rate_limits: {
      account: rates(rateLimits.account),
      base: rates(rateLimits.base),
      auth_token: rates(rateLimits.authToken),
      other: rates(rateLimits.other),
      ip_ceiling: rates(rateLimits.ipCeiling),
      delay_ms: rateLimits.delayMs,
      rules: rateLimits.rules.map((r) => ({
        name: r.name,
        method: r.methods,
        path: r.path,
        limits: rates(r.limits),
        mode: r.mode,
      })),
    },
    ...protectionViews(config),
    allow: config.allow,
    headers: config.headers,
    header_style: config.headerStyle,
    mode: config.mode,
    exempt: config.exempt,
    size_limits: sizeLimitsView(sizeLimits),
    monthly: {
      enabled: monthly.enabled,
      timezone: monthly.timezone,
      plans: Object.fromEntries(
        Object.entries(monthly.plans).map(([name, p]) => [
          name,
          p.callsPerUser !== undefined ? { calls_per_user: p.callsPerUser } : { calls: p.calls },
        ])
      ),
      teams: monthly.teams,
    },
    server: config.server,
    history: {
      removed: config.history.removed,
      deprecation_headers: config.history.deprecationHeaders,
    },
  }
}

function sizeLimitsView(sizeLimits: Config['sizeLimits']) {
  return {
    list_rows: sizeLimits.listRows,
    append_rows: sizeLimits.appendRows,
    update_rows: sizeLimits.updateRows,
    delete_rows: sizeLimits.deleteRows,
    sql_list: sizeLimits.sqlList,
    max_body_bytes: sizeLimits.maxBodyBytes,
    buffer_bytes: sizeLimits.bufferBytes,
    spill_bytes: sizeLimits.spillBytes,
    body_timeout_ms: sizeLimits.bodyTimeoutMs,
    client_share: sizeLimits.clientShareText,
    min_body_rate: sizeLimits.minBodyRate,
  }
}

const unlimitedOr = <T>(v: T) => (v === Infinity ? 'unlimited' : v)

/** SPEC §9's and §10's sections, as the file writes them. */
function protectionViews(config: Config) {
  return {
    overrides: config.overrides.map((o) => overrideJson(o, 'file')),
    protect: protectView(config.protect),
    charge: { server_errors: config.charge.serverErrors },
  }
}

function protectView(p: Config['protect']) {
  return {
    max_in_flight: unlimitedOr(p.maxInFlight),
    min_in_flight: p.minInFlight,
    queue_ms: p.queueMs,
    priority: p.priority,
    key_in_flight: unlimitedOr(p.keyInFlight),
  }
}

/** One setting that a reload changed, by its name in the file, with both values (masked). */
export interface SettingChange {
  setting: string
  old: unknown
  new: unknown
}

/** The settings whose values differ between two views, leaf by leaf (a list is one value). */
export function changedSettings(
  a: Record<string, unknown>,
  b: Record<string, unknown>,
  at = ''
): SettingChange[] {
  const out: SettingChange[] = []
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const x = a[k]
    const y = b[k]
    const name = at === '' ? k : `${at}.${k}`
    const isObj = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v)
    if (isObj(x) && isObj(y)) {
      out.push(...changedSettings(x as Record<string, unknown>, y as Record<string, unknown>, name))
    } else if (JSON.stringify(x) !== JSON.stringify(y)) {
      out.push({ setting: name, old: x, new: y })
    }
  }
  return out
}

/** The upstream and the store, URLs masked (a password, a query parameter named like a secret). */
function backendViews({ upstream, store }: Config) {
  return {
    upstream: {
      url: maskUrl(upstream.url),
      timeout_ms: upstream.timeoutMs,
      max_connections: upstream.maxConnections,
      max_connections_per_client: upstream.maxConnectionsPerClient,
      buffer_request_bytes: upstream.bufferRequestBytes,
      buffer_response_bytes: upstream.bufferResponseBytes,
      tunnel_idle_ms: upstream.tunnelIdleMs,
      max_tunnels: upstream.maxTunnels,
    },
    store: {
      url: maskUrl(store.url),
      cluster: store.cluster.map(maskUrl),
      prefix: store.prefix,
      timeout_ms: store.timeoutMs,
      on_error: store.onError,
      leases: store.leases,
      memory_keys: store.memoryKeys,
    },
  }
}
