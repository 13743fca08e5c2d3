import { Hono } from 'hono'
import { timingSafeEqual } from 'node:crypto'
import type { LimiterStore } from '../types.js'

export interface AdminDeps {
  token: () => string
  store: LimiterStore
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** SPEC §7 admin listener (health for now; usage, teams and reload come with issue 4). */
export function createAdminApp(deps: AdminDeps): Hono {
  const app = new Hono()
  app.use('*', async (c, next) => {
    const token = deps.token()
    if (token === '') return next()
    // SPEC §7: every admin call needs `Authorization: Bearer <token>`; anything else is 401.
    const given = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1]?.trim() ?? ''
    if (!sameSecret(given, token)) {
      return c.json({ error_msg: 'a valid admin bearer token is required' }, 401, { 'www-authenticate': 'Bearer' })
    }
    return next()
  })
  app.get('/healthz', (c) => c.json({ status: 'ok' }))
  app.get('/readyz', async (c) => {
    const ready = await deps.store.ready()
    return c.json({ status: ready ? 'ready' : 'store unavailable' }, ready ? 200 : 503)
  })
  app.notFound((c) => c.json({ error_msg: 'not found' }, 404))
  app.onError((err, c) => c.json({ error_msg: err.message }, 500))
  return app
}
