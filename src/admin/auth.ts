import { timingSafeEqual } from 'node:crypto'
import type { MiddlewareHandler } from 'hono'

/** Paths that answer anyone (SPEC §7: orchestrators probe over plain HTTP). */
const OPEN_PATHS = new Set(['/healthz', '/readyz'])

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/**
 * The secret an Authorization header carries: `Bearer <token>`, or HTTP Basic with the token
 * as the password (any user name), so a browser can open the status page.
 */
function givenSecret(header: string): string {
  const bearer = /^Bearer\s+(.+)$/i.exec(header)?.[1]?.trim()
  if (bearer !== undefined) return bearer
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header)?.[1]
  if (basic === undefined) return ''
  const decoded = Buffer.from(basic, 'base64').toString('utf8')
  const colon = decoded.indexOf(':')
  return colon === -1 ? '' : decoded.slice(colon + 1)
}

/** A read a person opened in a browser (a navigation, or one that takes HTML). */
function asksBrowser(
  path: string,
  method: string,
  fetchMode: string | undefined,
  accept: string | undefined
): boolean {
  if (path === '/') return true
  if (method !== 'GET' && method !== 'HEAD') return false
  return fetchMode === 'navigate' || (accept ?? '').includes('text/html')
}

/**
 * SPEC §7: with a token set, every admin call but the probes needs it: `Authorization: Bearer
 * <token>`, or Basic with the token as the password (so a browser can open the status page).
 */
export function bearerAuth(token: () => string): MiddlewareHandler {
  return async (c, next) => {
    const expected = token()
    if (expected === '' || OPEN_PATHS.has(c.req.path)) return next()
    if (!sameSecret(givenSecret(c.req.header('authorization') ?? ''), expected)) {
      // A browser asks for Basic (one challenge: Chromium does not answer a Basic one that
      // shares its header with Bearer): the page, and any read a person opens (an export's
      // link, SPEC §5). Tools get Bearer, as before.
      const challenge = asksBrowser(
        c.req.path,
        c.req.method,
        c.req.header('sec-fetch-mode'),
        c.req.header('accept')
      )
        ? 'Basic realm="basegate", charset="UTF-8"'
        : 'Bearer'
      return c.json({ error_msg: 'a valid admin bearer token is required' }, 401, {
        'www-authenticate': challenge,
      })
    }
    return next()
  }
}
