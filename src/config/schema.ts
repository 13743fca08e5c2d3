import { z } from 'zod'
import { rateValue } from '../limiter/rate.js'
import { overrideBody, OVERRIDE_NAME } from '../overrides/schema.js'

// The shape of limits.yaml as an operator writes it (snake_case, rates as text). It only
// validates; config/build.ts turns a valid document into the Config the code uses. Keeping
// transforms out keeps this schema exportable as JSON Schema for editors.

/** More processes than this is a typo, not a plan: each holds its own pools and connections. */
export const MAX_WORKERS = 64

/** SPEC §9: the classes that wait for a slot, in the default priority order. */
export const QUEUED_CLASSES = ['other', 'auth_token', 'account', 'base'] as const

const port = z.number().int().min(0).max(65535)
const SHARE_ERROR = (iss: { input?: unknown }) =>
  `${JSON.stringify(iss.input)} is not a share (1/8, or a number above 0 up to 1)`
/** A part of a whole: `1/8`, or a number above 0 and at most 1. */
export const share = z.union(
  [
    z.number().gt(0, { error: SHARE_ERROR }).max(1, { error: SHARE_ERROR }),
    z
      .string()
      .regex(/^\s*[1-9][0-9]*\s*\/\s*[1-9][0-9]*\s*$/, { error: SHARE_ERROR })
      .refine((v) => shareValue(v) !== null, { error: SHARE_ERROR }),
  ],
  { error: SHARE_ERROR }
)

/** `1/8` → 0.125; a number in (0, 1] as is; null for anything else. */
export function shareValue(v: number | string): number | null {
  let x: number
  if (typeof v === 'number') x = v
  else {
    const m = /^\s*([0-9]+)\s*\/\s*([0-9]+)\s*$/.exec(v)
    x = m === null ? Number.NaN : Number(m[1]) / Number(m[2])
  }
  return Number.isFinite(x) && x > 0 && x <= 1 ? x : null
}
const positiveInt = z.number().int().min(1)
const methodName = z
  .string()
  .regex(/^[A-Za-z]+$/, { error: (iss) => `${JSON.stringify(iss.input)} is not an HTTP method` })

const rule = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]+$/, { error: 'a rule name is letters, digits, _ . -' }),
  method: z.union([methodName, z.array(methodName).min(1)]).optional(),
  path: z.string().startsWith('/', { error: 'a rule path starts with /' }),
  limits: rateValue,
  mode: z.enum(['enforce', 'dry-run']).optional(),
})

const override = overrideBody.extend({
  name: z
    .string()
    .regex(OVERRIDE_NAME, { error: 'an override name is 1 to 64 letters, digits, _ . -' }),
})

export const planSchema = z
  .strictObject({ calls: positiveInt.optional(), calls_per_user: positiveInt.optional() })
  .refine((p) => (p.calls === undefined) !== (p.calls_per_user === undefined), {
    error: 'a plan has exactly one of calls or calls_per_user',
  })

const team = z.strictObject({
  id: z.string().min(1),
  plan: z.string().min(1),
  users: positiveInt.default(1),
  bases: z.array(z.string()).default([]),
})

export const limitsFileSchema = z.strictObject({
  deployment: z.enum(['cloud', 'dedicated', 'self-hosted']).optional(),
  workers: z
    .union([z.literal('auto'), z.number().int().min(1).max(MAX_WORKERS)], {
      error: (iss) =>
        `${JSON.stringify(iss.input)} is not a worker count (1 to ${MAX_WORKERS}, or auto)`,
    })
    .optional()
    .describe('proxy processes sharing one listener: 1, N, or auto (one per available core)'),
  listen: z
    .strictObject({
      host: z.string().min(1).optional(),
      port: port.optional(),
      headers_timeout_ms: positiveInt.optional(),
      request_timeout_ms: z.number().int().min(0).optional(),
      keepalive_timeout_ms: positiveInt.optional(),
      max_connections: z
        .union([z.literal('auto'), positiveInt], {
          error: (iss) =>
            `${JSON.stringify(iss.input)} is not a connection count (1 or more, or auto)`,
        })
        .optional()
        .describe(
          "client connections at once; auto: 90 % of the process's open-file limit less the upstream pool and the store"
        ),
      max_connections_per_client: positiveInt.optional(),
      tls: z.strictObject({ cert_file: z.string().min(1), key_file: z.string().min(1) }).optional(),
    })
    .optional(),
  admin: z
    .strictObject({
      host: z.string().min(1).optional(),
      port: port.optional(),
      token: z.string().optional(),
    })
    .optional(),
  upstream: z
    .strictObject({
      url: z.string().optional(),
      timeout_ms: positiveInt.optional(),
      max_connections: positiveInt.optional(),
      max_connections_per_client: positiveInt
        .optional()
        .describe(
          'upstream connections one client IP holds at once (default: 1/8 of max_connections)'
        ),
      buffer_request_bytes: z.number().int().min(0).optional(),
      buffer_response_bytes: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe(
          "an answer's bytes held in memory while its client reads slowly; past it, a temporary file (0: answers stream at the client's pace)"
        ),
      tunnel_idle_ms: positiveInt
        .optional()
        .describe('a WebSocket tunnel with no byte either way for this long is closed'),
      max_tunnels: positiveInt
        .optional()
        .describe('WebSocket tunnels open at once (default: 1/2 of max_connections)'),
    })
    .optional(),
  store: z
    .strictObject({
      url: z.string().optional(),
      cluster: z.array(z.string()).optional(),
      prefix: z.string().optional(),
      timeout_ms: positiveInt.optional(),
      on_error: z.enum(['open', 'closed']).optional(),
      leases: z.boolean().optional(),
      memory_keys: positiveInt
        .optional()
        .describe(
          'the in-memory store keeps at most this many windows; past it, the one idle longest is dropped'
        ),
    })
    .optional(),
  usage: z
    .strictObject({
      keep_after: z
        .number()
        .int()
        .min(0)
        .optional()
        .describe(
          "calls a day after which a key's day counts, upgrade report and tuning evidence are kept under its own name (below it: one others count per class and day)"
        ),
    })
    .optional(),
  client_ip: z
    .strictObject({
      trusted_proxies: z.array(z.string()).optional(),
      ipv6_prefix: z.number().int().min(1).max(128).optional(),
    })
    .optional(),
  rate_limits: z
    .strictObject({
      account: rateValue.optional(),
      base: rateValue.optional(),
      auth_token: rateValue.optional(),
      other: rateValue.optional(),
      rules: z.array(rule).optional(),
      ip_ceiling: rateValue.optional(),
      delay_ms: z.number().int().min(0).max(60_000).optional(),
    })
    .optional(),
  overrides: z.array(override).optional(),
  protect: z
    .strictObject({
      max_in_flight: z
        .union([z.literal('auto'), z.literal('unlimited'), z.number().int().min(1).max(100_000)], {
          error: (iss) =>
            `${JSON.stringify(iss.input)} is not a ceiling (1 to 100000, auto or unlimited)`,
        })
        .optional(),
      min_in_flight: z.number().int().min(1).max(1000).optional(),
      queue_ms: z.number().int().min(0).max(600_000).optional(),
      priority: z.array(z.enum(QUEUED_CLASSES)).min(1).optional(),
      key_in_flight: z
        .union([z.literal('unlimited'), positiveInt], {
          error: (iss) => `${JSON.stringify(iss.input)} is not a count (1 or more, or unlimited)`,
        })
        .optional(),
    })
    .optional(),
  charge: z.strictObject({ server_errors: z.boolean().optional() }).optional(),
  headers: z.enum(['gateway', 'all', 'none']).optional(),
  header_style: z.enum(['x-ratelimit', 'ietf', 'both']).optional(),
  mode: z.enum(['enforce', 'dry-run']).optional(),
  allow: z
    .strictObject({
      clients: z.array(z.string()).optional(),
      bases: z.array(z.string()).optional(),
    })
    .optional(),
  exempt: z.array(z.string().startsWith('/', { error: 'an exempt path starts with /' })).optional(),
  size_limits: z
    .strictObject({
      list_rows: positiveInt.optional(),
      append_rows: positiveInt.optional(),
      update_rows: positiveInt.optional(),
      delete_rows: positiveInt.optional(),
      sql_list: positiveInt.optional(),
      max_body_bytes: positiveInt.optional(),
      buffer_bytes: positiveInt.optional(),
      spill_bytes: positiveInt.optional(),
      body_timeout_ms: z.number().int().min(100).max(3_600_000).optional(),
      client_share: share.optional(),
      min_body_rate: z.number().int().min(0).optional(),
    })
    .optional(),
  server: z
    .strictObject({
      version: z
        .string()
        .regex(/^(?:auto|\d{1,3}\.\d{1,3}(?:\.\d+)?)$/, {
          error: (iss) => `${JSON.stringify(iss.input)} is not a version (6.2) or auto`,
        })
        .optional(),
    })
    .optional(),
  history: z
    .strictObject({
      removed: z.enum(['gone', 'pass']).optional(),
      deprecation_headers: z.boolean().optional(),
    })
    .optional(),
  monthly: z
    .strictObject({
      enabled: z.boolean().optional(),
      timezone: z.string().optional(),
      plans: z.record(z.string(), planSchema).optional(),
      teams: z.array(team).optional(),
    })
    .optional(),
})

export type LimitsFile = z.infer<typeof limitsFileSchema>
