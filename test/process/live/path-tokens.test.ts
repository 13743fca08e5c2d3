import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { startLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { until } from '../../helpers/until.js'
import { startStubUpstream, type StubUpstream } from '../../helpers/stub-upstream.js'

// Issue #20 / SPEC §6: a token carried in a path never leaves basegate whole — not in the log
// line, not in an error_msg, not in the admin API, not in the upgrade report — and a token
// segment is never a base, even when it is shaped like one (those calls count per client IP).

const HEX32 = 'a1b2c3d4e5f60718293a4b5c6d7e8f90'
const UUIDISH = 'c0ffee00-1111-4c59-9a51-3e2d7c8b9a10'
const SHORT = 'Zx9-tokenAbc_123'
const TOKENS = [HEX32, UUIDISH, SHORT]
const PATHS = (t: string) => [
  `/dtable/external-links/${t}/`,
  `/dtable/view-external-links/${t}/`,
  `/api/v2.1/dtable/share-links/${t}/`,
  `/api/v2.1/dtables/invite-links/${t}/`,
  `/api/v2.1/external-link-tokens/${t}/access-token/`,
  `/api/v2.1/upload-links/${t}/upload/`,
  `/api/v2.1/download-links/${t}/`,
  `/dtable/forms/${t}/`,
  `/api/v2.1/forms/${t}/submit/`,
  `/api/v2.1/universal-apps/${t}/app-settings/`,
  `/api/v2.1/external-apps/${t}/`,
]
const FAST = { BASEGATE_REPORT_FLUSH_MS: '100' }

/** Every place the token could leak in a text: whole, in either case, or without hyphens. */
function leaks(text: string, token: string): boolean {
  const t = text.toLowerCase()
  return t.includes(token.toLowerCase()) || t.includes(token.replace(/-/g, '').toLowerCase())
}

let up: StubUpstream
let old: Gateway // a 6.0 server: the 6.1 removal is in the upgrade report
let current: Gateway // a 6.2 server: the removed endpoint is answered 410
beforeAll(async () => {
  up = await startStubUpstream()
  const yaml = (v: string) =>
    testYaml(
      up.url,
      `server: { version: "${v}" }\nrate_limits: { account: 100/min, other: 100/min }\nusage: { keep_after: 0 }`
    )
  old = await startLive(yaml('6.0'), { env: FAST })
  current = await startLive(yaml('6.2'), { env: FAST })
})
afterAll(async () => {
  await old?.stop()
  await current?.stop()
  await up?.close()
})

describe('tokens in paths', () => {
  it.each(TOKENS)(
    'token %s: the log line shows 4 characters and the key is the client IP',
    async (token) => {
      for (const path of PATHS(token)) {
        const a = await send(old.port, { path })
        expect(a.status).toBe(200)
        const line = await old.waitForLog(
          (l) =>
            typeof l.path === 'string' &&
            l.path.startsWith(path.split(token)[0]!) &&
            l.path.includes(`${token.slice(0, 4)}…`)
        )
        expect(line.key).toBe('ip:127.0.0.1')
        expect(leaks(JSON.stringify(line), token), JSON.stringify(line)).toBe(false)
      }
      // Not counted as a base: no base window of that name has any call.
      const asBase = UUIDISH === token || HEX32 === token
      if (asBase) {
        const usage = JSON.parse(
          (await send(old.adminPort, { path: `/v1/usage/base/${token}` })).body
        )
        expect(usage.windows.every((w: { used: number }) => w.used === 0)).toBe(true)
      }
    }
  )

  it('the 410 of a removed token endpoint names it by its pattern, in the answer and the log', async () => {
    for (const token of TOKENS) {
      for (const method of ['GET', 'HEAD']) {
        const path = `/api/v2.1/external-link-tokens/${token}/access-token/`
        const a = await send(current.port, { method, path })
        expect(a.status).toBe(410)
        if (method === 'GET') {
          const msg = JSON.parse(a.body).error_msg as string
          expect(msg).toContain('/api/v2.1/external-link-tokens/{token}/access-token/')
          expect(leaks(msg, token)).toBe(false)
        }
      }
    }
    const lines = await until(
      'the request lines of the 410s',
      () => current.logs.filter((l) => l.status === 410),
      (ls) => ls.length >= TOKENS.length * 2
    )
    expect(lines.length).toBe(TOKENS.length * 2)
    for (const token of TOKENS) expect(leaks(JSON.stringify(lines), token)).toBe(false)
    expect(
      up.seen.some(
        (s) =>
          s.url.includes('external-link-tokens') && s.headers.host?.includes(String(current.port))
      )
    ).toBe(false)
  })

  it('the upgrade report and the usage API never carry a token', async () => {
    for (const token of TOKENS) {
      await send(old.port, { path: `/api/v2.1/external-link-tokens/${token}/access-token/` })
      await send(old.port, {
        method: 'HEAD',
        path: `/api/v2.1/external-link-tokens/${token}/access-token/`,
      })
    }
    // The report writes what this instance holds before it reads.
    const text = (await send(old.adminPort, { path: '/v1/upgrade-report?to=6.2' })).body
    const report = JSON.parse(text)
    const entry = report.entries.find(
      (e: { id: string }) => e.id === 'external-link-access-token-removed'
    )
    // GET and HEAD both match what GET matches (SPEC §8), every one counted on the client IP.
    expect(entry.calls).toBeGreaterThanOrEqual(TOKENS.length * 2)
    expect(entry.top_keys).toEqual([{ key: 'ip:127.0.0.1', calls: entry.calls }])
    const usage = (await send(old.adminPort, { path: '/v1/usage/ip/127.0.0.1' })).body
    for (const token of TOKENS) {
      expect(leaks(text, token)).toBe(false)
      expect(leaks(usage, token)).toBe(false)
    }
  })
})
