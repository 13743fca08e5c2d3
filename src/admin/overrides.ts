import type { Context, Hono } from 'hono'
import type { ConfigHolder } from '../config/holder.js'
import { issueToProblems } from '../config/load.js'
import { OVERRIDE_NAME, overrideBody } from '../overrides/schema.js'
import { overrideJson } from '../overrides/view.js'
import { buildOverride } from '../overrides/build.js'
import type { ChangeStore } from '../config/changes.js'
import type { ConfigProblem } from '../types.js'
import { readAdminJson } from './teams.js'

// SPEC §10: GET /v1/overrides, PUT and DELETE /v1/overrides/{name}. A change is written to the
// store (every instance sharing it applies it on its channel message, within a second) and
// applied here at once.

export function overrideRoutes(
  app: Hono,
  deps: { holder: ConfigHolder; changes: ChangeStore }
): void {
  const { holder, changes: store } = deps
  // A read answers what the shared store holds now; with the store down, the last view.
  const refresh = () => holder.tryRefreshTeams(store)
  const list = (c: Context) => {
    const live = holder.liveOverrides
    return c.json({
      overrides: holder.current.overrides.all.map((o) =>
        overrideJson(o, live.has(o.name) ? 'api' : 'file')
      ),
    })
  }

  app.get('/v1/overrides', async (c) => {
    await refresh()
    return list(c)
  })

  app.put('/v1/overrides/:name', async (c) => {
    const name = c.req.param('name')
    if (!OVERRIDE_NAME.test(name))
      return c.json({ error_msg: 'an override name is 1 to 64 letters, digits, _ . -' }, 400)
    const body = await readAdminJson(c)
    if ('error' in body) return c.json({ error_msg: body.error }, 400)
    const parsed = overrideBody.safeParse(body.json, { reportInput: true })
    const problems: ConfigProblem[] = []
    if (!parsed.success) {
      for (const issue of parsed.error.issues) problems.push(...issueToProblems(issue))
      return invalid(c, problems)
    }
    const teamIds = new Set(holder.current.teams.map((t) => t.id))
    const o = buildOverride(problems, '', name, parsed.data, teamIds)
    if (problems.length > 0) return invalid(c, problems)
    await store.setOverride(name, { override: o })
    await holder.refreshTeams(store)
    return c.json(overrideJson(o, 'api'))
  })

  app.delete('/v1/overrides/:name', async (c) => {
    const name = c.req.param('name')
    await refresh()
    const inFile = holder.current.config.overrides.some((o) => o.name === name)
    const known = holder.current.overrides.all.some((o) => o.name === name)
    if (!known) return c.json({ error_msg: `${JSON.stringify(name)} is not an override` }, 404)
    // One the file names stays deleted (until the file drops it too); one of the API's goes.
    await store.setOverride(name, inFile ? { deleted: true } : null)
    await holder.refreshTeams(store)
    return c.json({ deleted: name })
  })
}

/** 400 naming every field at fault (`limits.base`, `teams[0]`), without the leading dot. */
function invalid(c: Context, problems: ConfigProblem[]) {
  const lines = problems.map((p) => `${p.field.replace(/^\./, '') || '(body)'}: ${p.message}`)
  return c.json({ error_msg: `the override is invalid: ${lines.join('; ')}`, problems: lines }, 400)
}
