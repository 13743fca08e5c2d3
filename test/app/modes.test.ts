import { describe, expect, it } from 'vitest'
import { inProcess, BASE } from '../helpers/in-process.js'

// SPEC §10 mode: dry-run, headers: all with a rule, and trusted proxies before the IP ceiling,
// through the gateway's own answers (in process).

const rowsPath = (u = BASE) => `/api-gateway/api/v2/dtables/${u}/rows/`

describe('dry-run', () => {
  it('forwards calls over the limit, logs them at warn with dry_run, and does not charge them', async () => {
    const g = inProcess('mode: dry-run\nrate_limits: { base: 2/min }')
    const statuses: number[] = []
    const remaining: unknown[] = []
    for (let i = 0; i < 4; i++) {
      const a = await g.call('GET', rowsPath())
      statuses.push(a.status!)
      remaining.push(a.headers!['x-ratelimit-remaining'])
      expect(a.headers!['retry-after']).toBeUndefined()
    }
    expect(statuses).toEqual([200, 200, 200, 200])
    expect(remaining.map(String)).toEqual(['1', '0', '0', '0'])
    expect(g.forwarded).toHaveLength(4)
    const warned = g.requestLines().filter((l) => l.dry_run === true)
    expect(warned).toHaveLength(2)
    expect(warned[0]).toMatchObject({ level: 'warn', status: 200 })
  })
})

describe('headers: all and a rule', () => {
  it('puts headers on account calls and describes the window with the fewest calls left', async () => {
    const g = inProcess(`headers: all
rate_limits:
  account: 100/min
  rules:
    - { name: tight, method: GET, path: /api/v2.1/dtable/*, limits: 2/min }`)
    const a = await g.call('GET', '/api/v2.1/dtable/app-access-token/')
    expect(String(a.headers!['x-ratelimit-limit'])).toBe('2')
    expect(String(a.headers!['x-ratelimit-remaining'])).toBe('1')
    await g.call('GET', '/api/v2.1/dtable/app-access-token/')
    const refused = await g.call('GET', '/api/v2.1/dtable/app-access-token/')
    expect(refused.status).toBe(429)
    // The rule refused; the class window was not charged by the refusal.
    const other = await g.call('GET', '/api/v2.1/user/')
    expect(String(other.headers!['x-ratelimit-limit'])).toBe('100')
    expect(String(other.headers!['x-ratelimit-remaining'])).toBe('97')
  })
})

describe('trusted proxies and the IP ceiling', () => {
  it('believes X-Forwarded-For from a trusted peer, and the ceiling stops UUID rotation', async () => {
    const g = inProcess(
      'client_ip: { trusted_proxies: [127.0.0.0/8] }\nrate_limits: { account: 2/min, ip_ceiling: 5/min }'
    )
    const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip }, remote: '127.0.0.1' })
    const status = async (path: string, ip: string) => (await g.call('GET', path, from(ip))).status
    expect(await status('/api2/repos/', '198.51.100.1')).toBe(200)
    expect(await status('/api2/repos/', '198.51.100.1')).toBe(200)
    expect(await status('/api2/repos/', '198.51.100.1')).toBe(429)
    // Another client behind the same proxy has its own count.
    expect(await status('/api2/repos/', '198.51.100.2')).toBe(200)
    // An untrusted peer's X-Forwarded-For is not believed: it counts as the peer.
    const untrusted = { headers: { 'x-forwarded-for': '198.51.100.9' }, remote: '10.9.9.9' }
    for (let i = 0; i < 2; i++) await g.call('GET', '/api2/repos/', untrusted)
    expect((await g.call('GET', '/api2/repos/', untrusted)).status).toBe(429)
    expect(await status('/api2/repos/', '198.51.100.9')).toBe(200)
    // Rotating base UUIDs: each base is fresh, but the ceiling on the IP holds.
    const statuses: number[] = []
    for (let i = 0; i < 7; i++) {
      const u = `${(100 + i).toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
      statuses.push((await status(rowsPath(u), '198.51.100.3'))!)
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429])
  })
})
