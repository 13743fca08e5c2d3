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
  }
}
