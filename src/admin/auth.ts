import { timingSafeEqual } from 'node:crypto'
import type { MiddlewareHandler } from 'hono'

/** Paths that answer anyone (SPEC §7: orchestrators probe over plain HTTP). */
const OPEN_PATHS = new Set(['/healthz', '/readyz'])

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** SPEC §7: with a token set, every admin call but the probes needs `Authorization: Bearer <token>`. */
export function bearerAuth(token: () => string): MiddlewareHandler {
  return async (c, next) => {
    const expected = token()
    if (expected === '' || OPEN_PATHS.has(c.req.path)) return next()
    const given = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1]?.trim() ?? ''
    if (!sameSecret(given, expected)) {
      return c.json({ error_msg: 'a valid admin bearer token is required' }, 401, {
        'www-authenticate': 'Bearer',
      })
    }
    return next()
  }
}
