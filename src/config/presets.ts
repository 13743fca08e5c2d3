import type { Deployment, LimitedClass } from '../types.js'

/** SPEC §3: the published per-minute limits of each deployment; null is unlimited. */
export const PRESETS: Record<Deployment, Record<LimitedClass, string>> = {
  cloud: { auth_token: '60/min', base: '200/min', account: '1000/min', other: 'unlimited' },
  dedicated: { auth_token: 'unlimited', base: '500/min', account: '3000/min', other: 'unlimited' },
  'self-hosted': {
    auth_token: 'unlimited',
    base: '500/min',
    account: '3000/min',
    other: 'unlimited',
  },
}

export const DEFAULT_EXEMPT = ['/ping', '/server-info', '/api2/ping', '/api-gateway/api/v2/ping']

export const DEFAULT_PLANS = {
  free: { calls: 3000 },
  plus: { callsPerUser: 10000 },
  enterprise: { callsPerUser: 50000 },
}
