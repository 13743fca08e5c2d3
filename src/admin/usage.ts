import type { Context, Hono } from 'hono'
import ipaddr from 'ipaddr.js'
import type { ConfigHolder } from '../config/holder.js'
import { parseUuid, shownKey } from '../request/base-uuid.js'
import { windowMsOf, type Charge, type Windows, type WindowState } from '../types.js'

// SPEC §7: GET /v1/usage/base/{uuid} and /v1/usage/ip/{ip}, read without charging.

function windowJson(charge: Charge, w: WindowState) {
  return {
    class: charge.cls,
    ...(charge.kind === 'rule' ? { rule: charge.rule } : {}),
    ...(charge.kind === 'ip_ceiling' ? { ip_ceiling: true } : {}),
    ...(charge.kind === 'class' && charge.override !== undefined
      ? { override: charge.override }
      : {}),
    ...(charge.kind === 'rule' && charge.dryRun ? { dry_run: true } : {}),
    limit: w.limit,
    window_s: windowMsOf(charge) / 1000,
    used: w.used,
    remaining: w.remaining,
    reset: Math.ceil(w.resetAtMs / 1000),
  }
}

export function usageRoutes(
  app: Hono,
  deps: { holder: ConfigHolder; store: Windows; now: () => number }
): void {
  const { holder, store, now } = deps
  async function usage(c: Context, key: string, charges: Charge[], override: string | null) {
    const d = await store.peek(charges, now())
    const windows = []
    let monthly = null
    for (let i = 0; i < charges.length; i++) {
      const ch = charges[i]!
      const w = d.windows[i]!
      if (ch.kind === 'monthly') {
        monthly = {
          team: ch.team,
          quota: w.limit,
          used: w.used,
          reset: Math.ceil(w.resetAtMs / 1000),
        }
      } else windows.push(windowJson(ch, w))
    }
    // SPEC §10: the override that applies to the key (its windows carry its name too).
    return c.json({ key: shownKey(key), override, windows, monthly })
  }
  app.get('/v1/usage/base/:uuid', async (c) => {
    const uuid = parseUuid(c.req.param('uuid'))
    if (uuid === null)
      return c.json({ error_msg: `${JSON.stringify(c.req.param('uuid'))} is not a base UUID` }, 400)
    const { classifier } = holder.current
    const override = classifier.overrideOf(uuid, '')?.name ?? null
    return usage(c, `base:${uuid}`, classifier.windowsOfBase(uuid, now()), override)
  })
  app.get('/v1/usage/ip/:ip', async (c) => {
    const raw = c.req.param('ip')
    if (!ipaddr.isValid(raw))
      return c.json({ error_msg: `${JSON.stringify(raw)} is not an IP address` }, 400)
    const snap = holder.current
    const ip = ipaddr.process(raw).toString()
    const ipKey = snap.clientIp.keyOf(ip)
    const override = snap.classifier.overrideOf(null, ip)?.name ?? null
    return usage(c, `ip:${ipKey}`, snap.classifier.windowsOfIp(ipKey, ip), override)
  })
}
