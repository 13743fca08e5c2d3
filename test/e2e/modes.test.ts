import { describe, expect, it } from 'vitest'
import { startGateway, testYaml } from '../helpers/gateway-process.js'
import { rowsPath, send } from '../helpers/http.js'
import { useStubUpstream } from '../helpers/stub-upstream.js'

const up = useStubUpstream()

describe('dry-run', () => {
  it('forwards calls over the limit, logs them at warn with dry_run, and does not charge them', async () => {
    const gw = await startGateway(testYaml(up.url, 'mode: dry-run\nrate_limits: { base: 2/min }'))
    try {
      const statuses: number[] = []
      const remaining: string[] = []
      for (let i = 0; i < 4; i++) {
        const a = await send(gw.port, { path: rowsPath() })
        statuses.push(a.status)
        remaining.push(a.headers['x-ratelimit-remaining'] as string)
        expect(a.headers['retry-after']).toBeUndefined()
      }
      expect(statuses).toEqual([200, 200, 200, 200])
      expect(remaining).toEqual(['1', '0', '0', '0'])
      const warn = await gw.waitForLog((l) => l.dry_run === true)
      expect(warn.level).toBe('warn')
      expect(warn.status).toBe(200)
      const deadline = Date.now() + 3000
      while (gw.logs.filter((l) => l.dry_run === true).length < 2 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20))
      expect(gw.logs.filter((l) => l.dry_run === true)).toHaveLength(2)
    } finally {
      await gw.stop()
    }
  })
})

describe('headers: all and a rule', () => {
  it('puts headers on account calls and describes the window with the fewest calls left', async () => {
    const gw = await startGateway(
      testYaml(
        up.url,
        `headers: all
rate_limits:
  account: 100/min
  rules:
    - { name: tight, method: GET, path: /api/v2.1/dtable/*, limits: 2/min }`
      )
    )
    try {
      const a = await send(gw.port, { path: '/api/v2.1/dtable/app-access-token/' })
      expect(a.headers['x-ratelimit-limit']).toBe('2')
      expect(a.headers['x-ratelimit-remaining']).toBe('1')
      await send(gw.port, { path: '/api/v2.1/dtable/app-access-token/' })
      const refused = await send(gw.port, { path: '/api/v2.1/dtable/app-access-token/' })
      expect(refused.status).toBe(429)
      // The rule refused; the class window was not charged by the refusal.
      const other = await send(gw.port, { path: '/api/v2.1/user/' })
      expect(other.headers['x-ratelimit-limit']).toBe('100')
      expect(other.headers['x-ratelimit-remaining']).toBe('97')
    } finally {
      await gw.stop()
    }
  })
})

describe('trusted proxies and the IP ceiling', () => {
  it('believes X-Forwarded-For from a trusted peer, and the ceiling stops UUID rotation', async () => {
    const gw = await startGateway(
      testYaml(
        up.url,
        'client_ip: { trusted_proxies: [127.0.0.0/8] }\nrate_limits: { account: 2/min, ip_ceiling: 5/min }'
      )
    )
    try {
      const from = (ip: string) => ({ 'x-forwarded-for': ip })
      expect(
        (await send(gw.port, { path: '/api2/repos/', headers: from('198.51.100.1') })).status
      ).toBe(200)
      expect(
        (await send(gw.port, { path: '/api2/repos/', headers: from('198.51.100.1') })).status
      ).toBe(200)
      expect(
        (await send(gw.port, { path: '/api2/repos/', headers: from('198.51.100.1') })).status
      ).toBe(429)
      // Another client behind the same proxy has its own count.
      expect(
        (await send(gw.port, { path: '/api2/repos/', headers: from('198.51.100.2') })).status
      ).toBe(200)
      // Rotating base UUIDs: each base is fresh, but the ceiling on the IP holds.
      const statuses: number[] = []
      for (let i = 0; i < 7; i++) {
        const u = `${(100 + i).toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
        statuses.push(
          (await send(gw.port, { path: rowsPath(u), headers: from('198.51.100.3') })).status
        )
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429])
    } finally {
      await gw.stop()
    }
  })
})
