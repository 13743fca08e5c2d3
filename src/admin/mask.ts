import type { Config } from '../types.js'

const MASK = '****'

/** A URL with its password (and user) hidden: redis://:secret@host → redis://****@host. */
export function maskUrl(url: string): string {
  if (url === '') return url
  try {
    const u = new URL(url)
    if (u.password === '' && u.username === '') return url
    u.username = MASK
    u.password = ''
    return u.toString()
  } catch {
    return MASK
  }
}

/** GET /v1/config: the running configuration with every secret masked. */
export function maskedConfig(config: Config): unknown {
  return {
    ...config,
    admin: { ...config.admin, token: config.admin.token === '' ? '' : MASK },
    upstream: { ...config.upstream, url: maskUrl(config.upstream.url) },
    store: {
      ...config.store,
      url: maskUrl(config.store.url),
      cluster: config.store.cluster.map(maskUrl),
    },
    rateLimits: {
      ...config.rateLimits,
      // Rates as written in the file, not their internal form.
      account: config.rateLimits.account.map((r) => r.text),
      base: config.rateLimits.base.map((r) => r.text),
      authToken: config.rateLimits.authToken.map((r) => r.text),
      other: config.rateLimits.other.map((r) => r.text),
      ipCeiling: config.rateLimits.ipCeiling.map((r) => r.text),
      rules: config.rateLimits.rules.map((r) => ({ ...r, limits: r.limits.map((x) => x.text) })),
    },
  }
}
