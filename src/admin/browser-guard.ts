import type { MiddlewareHandler } from 'hono'

// SPEC §7: a browser must not be made to change state across sites with a cached Basic login
// (the status page lets a browser hold one). A state-changing call that a browser marks as sent
// from another site — an `Origin` that is not this listener's own, or `Sec-Fetch-Site:
// cross-site`/`same-site` — is refused before its credentials are looked at. Tools (curl, the
// CLI, orchestrators) send neither header and are not affected. Every answer is `no-store`:
// usage, config and status must not sit in a shared cache or the browser's.

const STATE_CHANGING = new Set(['POST', 'PUT', 'DELETE', 'PATCH'])
const FOREIGN_FETCH = new Set(['cross-site', 'same-site'])

/** Why a call is refused as cross-site, or null. `host` is the Host the call was sent to. */
export function crossSiteReason(
  method: string,
  headers: { origin?: string; secFetchSite?: string; host?: string }
): string | null {
  if (!STATE_CHANGING.has(method)) return null
  const site = headers.secFetchSite?.trim().toLowerCase()
  if (site !== undefined && FOREIGN_FETCH.has(site)) return `Sec-Fetch-Site: ${site}`
  const origin = headers.origin
  if (origin === undefined) return null
  const own = headers.host === undefined ? null : `http://${headers.host}`.toLowerCase()
  if (own === null || origin.trim().toLowerCase() !== own) return `Origin ${origin}`
  return null
}

/** The probes answer anyone (SPEC §7), whatever Host they were sent to. */
const PROBES = new Set(['/healthz', '/readyz'])

/**
 * A Host header that names this machine's loopback: `localhost` (or a name under it), a
 * 127.0.0.0/8 address, `[::1]`, with or without a port.
 */
export function isLoopbackHost(host: string | undefined): boolean {
  if (host === undefined) return false
  const h = host.trim().toLowerCase()
  const name = h.startsWith('[') ? h.slice(0, h.indexOf(']') + 1) : h.replace(/:\d*$/, '')
  if (name === 'localhost' || name.endsWith('.localhost')) return true
  if (name === '[::1]') return true
  return /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.test(name)
}

/**
 * SPEC §7 and issue #39 item 5: a listener without a token answers only calls sent to a
 * loopback name. A page of another site that rebinds its own DNS name to 127.0.0.1 reaches the
 * listener with its own name as the Host (DNS rebinding): refused before anything is read.
 */
export function hostGuard(token: () => string): MiddlewareHandler {
  return async (c, next) => {
    // The Host header, or (a call made in process, which has none) the URL's.
    const host = c.req.header('host') ?? new URL(c.req.url).host
    if (token() !== '' || PROBES.has(c.req.path) || isLoopbackHost(host)) return next()
    return c.json(
      {
        error_msg: `the admin listener has no token and answers only loopback host names (localhost, 127.0.0.1, [::1]), not ${JSON.stringify(host)}`,
      },
      403,
      { 'cache-control': 'no-store' }
    )
  }
}

export function browserGuard(): MiddlewareHandler {
  return async (c, next) => {
    const reason = crossSiteReason(c.req.method, {
      origin: c.req.header('origin'),
      secFetchSite: c.req.header('sec-fetch-site'),
      host: c.req.header('host'),
    })
    if (reason !== null) {
      return c.json(
        { error_msg: `a call that changes state is refused from another site (${reason})` },
        403,
        { 'cache-control': 'no-store' }
      )
    }
    await next()
    c.res.headers.set('cache-control', 'no-store')
    c.res.headers.set('x-content-type-options', 'nosniff')
  }
}
