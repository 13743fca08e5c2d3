import { DEFAULT_EXEMPT } from './presets.js'

/**
 * The static defaults of limits.yaml, in the file's own spelling: config/build.ts applies
 * them and the JSON Schema shows them (config/json-schema.ts), so they are written once.
 * Defaults that depend on `deployment` (the rate presets, `monthly.enabled`) live in presets.ts.
 */
export const DEFAULTS = {
  deployment: 'self-hosted',
  workers: 1 as number | 'auto',
  listen: {
    host: '0.0.0.0',
    port: 8080,
    headers_timeout_ms: 20_000,
    request_timeout_ms: 300_000,
    keepalive_timeout_ms: 5_000,
    max_connections: 'auto' as number | 'auto',
    max_connections_per_client: 256,
  },
  admin: { host: '127.0.0.1', port: 9090, token: '' },
  upstream: {
    url: 'http://127.0.0.1:8000',
    timeout_ms: 60_000,
    max_connections: 256,
    buffer_request_bytes: 1_048_576,
    buffer_response_bytes: 262_144,
    tunnel_idle_ms: 120_000,
  },
  store: {
    url: '',
    cluster: [] as string[],
    prefix: 'basegate:',
    timeout_ms: 100,
    on_error: 'open',
    leases: false,
    memory_keys: 200_000,
  },
  usage: { keep_after: 100 },
  client_ip: { trusted_proxies: [] as string[], ipv6_prefix: 64 },
  rate_limits: { ip_ceiling: 'unlimited', rules: [] as unknown[], delay_ms: 0 },
  protect: {
    max_in_flight: 'unlimited' as number | 'auto' | 'unlimited',
    min_in_flight: 4,
    queue_ms: 1000,
    priority: ['other', 'auth_token', 'account', 'base'] as string[],
    key_in_flight: 'unlimited' as number | 'unlimited',
  },
  charge: { server_errors: true },
  allow: { clients: [] as string[], bases: [] as string[] },
  headers: 'gateway',
  header_style: 'x-ratelimit',
  mode: 'enforce',
  exempt: DEFAULT_EXEMPT,
  size_limits: {
    list_rows: 1000,
    append_rows: 1000,
    update_rows: 1000,
    delete_rows: 10_000,
    sql_list: 10_000,
    max_body_bytes: 16_777_216,
    buffer_bytes: 268_435_456,
    spill_bytes: 1_073_741_824,
    body_timeout_ms: 30_000,
    client_share: '1/8' as number | string,
    min_body_rate: 8_192,
  },
  monthly: { timezone: 'UTC', teams: [] as unknown[] },
  server: { version: 'auto' },
  history: { removed: 'gone', deprecation_headers: true },
} as const
