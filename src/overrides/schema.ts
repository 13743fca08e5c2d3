import { z } from 'zod'
import { rateValue } from '../limiter/rate.js'

// SPEC §10: an override as limits.yaml and `PUT /v1/overrides/{name}` write it (the file's
// schema takes it from here).

/** SPEC §10: one override, as the file and `PUT /v1/overrides/{name}` write it. */
export const overrideBody = z.strictObject({
  bases: z.array(z.string()).optional(),
  teams: z.array(z.string().min(1)).optional(),
  clients: z.array(z.string()).optional(),
  limits: z.strictObject({
    account: rateValue.optional(),
    base: rateValue.optional(),
    auth_token: rateValue.optional(),
    other: rateValue.optional(),
  }),
  shared: z.boolean().optional(),
  mode: z.enum(['enforce', 'dry-run']).optional(),
})

/** The name a broken rule or override set aside carries (config/load.ts; the build skips it). */
export const SET_ASIDE = '__set_aside_'

export const OVERRIDE_NAME = /^[A-Za-z0-9_.-]{1,64}$/
