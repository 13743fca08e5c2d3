import { connect } from 'node:net'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Hostile input through the real process: a seeded fuzz (a few thousand cases, bounded),
// request smuggling, oversized headers, slowloris, key-space floods. The oracles below are
// written from SPEC.md, independently of src/.

const LIMITS = { base: 5, account: 5, auth_token: 3 }

function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** One raw HTTP/1.1 exchange: exact bytes out, status (or 0 when the socket just closed) back. */
function raw(
  port: number,
  bytes: string | Buffer,
  timeoutMs = 5000
): Promise<{ status: number; text: string; closedMs: number }> {
  return new Promise((resolve) => {
    const t0 = Date.now()
    const sock = connect(port, '127.0.0.1')
    let buf = ''
    const done = () => {
      clearTimeout(timer)
      const m = /^HTTP\/1\.1 (\d{3})/.exec(buf)
      resolve({ status: m ? Number(m[1]) : 0, text: buf, closedMs: Date.now() - t0 })
    }
    const timer = setTimeout(() => {
      sock.destroy()
    }, timeoutMs)
    sock.on('data', (d) => (buf += d.toString('latin1')))
    sock.on('close', done)
    sock.on('error', () => {})
    sock.write(bytes)
  })
}

// ---- oracles from SPEC §3 and §6 ----

const UNRESERVED = /[A-Za-z0-9\-._~]/
function oracleNormalize(p: string): string | null {
  if (/\\|%2f|%5c|%00|\0/i.test(p)) return null
  let d = ''
  for (let i = 0; i < p.length; i++) {
    if (p[i] !== '%') {
      d += p[i]
      continue
    }
    const hex = p.slice(i + 1, i + 3)
    if (!/^[0-9a-f]{2}$/i.test(hex)) return null
    const ch = String.fromCharCode(parseInt(hex, 16))
    d += UNRESERVED.test(ch) ? ch : '%' + hex.toUpperCase()
    i += 2
  }
  const segs = d.split('/').slice(1)
  const out: string[] = []
  for (const s of segs) {
    if (s === '' || s === '.') continue
    if (s === '..') {
      if (out.length === 0) return null
      out.pop()
    } else out.push(s)
  }
  const last = segs[segs.length - 1]
  return (
    '/' +
    out.join('/') +
    (out.length > 0 && (last === '' || last === '.' || last === '..') ? '/' : '')
  )
}

const UUID =
  /\/dtables\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})(?=\/|$)/i
function oracleClass(path: string): { cls: string; key: string } {
  const l = path.toLowerCase()
  const whole = l.length > 1 && l.endsWith('/') ? l.slice(0, -1) : l
  const m = UUID.exec(path)
  const key = m ? `base:${m[1]!.replace(/-/g, '').toLowerCase()}` : 'ip'
  if (['/ping', '/server-info', '/api2/ping', '/api-gateway/api/v2/ping'].includes(whole))
    return { cls: 'exempt', key }
  if (whole === '/api2/auth-token') return { cls: 'auth_token', key }
  if (l.startsWith('/api-gateway/')) return { cls: 'base', key }
  if (['/api/v2.1/', '/api2/', '/api/v1/'].some((x) => l.startsWith(x)))
    return { cls: 'account', key }
  return { cls: 'other', key }
}

let up: StubUpstream
let redis: TestRedis
let gw: GatewayProcess

beforeAll(async () => {
  redis = await startRedis()
  up = await startStubUpstream()
  gw = await startGateway(
    testYaml(
      up.url,
      `listen: { host: 127.0.0.1, port: 0, headers_timeout_ms: 500, request_timeout_ms: 2000 }
store: { url: "${redis.url}", prefix: "${redis.prefix}", timeout_ms: 5000 }
rate_limits: { base: ${LIMITS.base}/min, account: ${LIMITS.account}/min, auth_token: ${LIMITS.auth_token}/min }`
    ).replace(/^listen:.*\n/m, '')
  )
})
afterAll(async () => {
  await gw?.stop()
  await up?.close()
  await redis?.stop()
})

describe('seeded fuzz over paths, methods, headers and bodies', () => {
  it('never crashes, forwards only the normalised path, and never lets a counted call go uncounted', async () => {
    const rand = rng(20261122)
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
    const uuids = [
      '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10',
      '0a1b2c3d-0d3b-4c59-9a51-3e2d7c8b9a10',
      'ffffffff-ffff-4fff-8fff-ffffffffffff',
    ]
    const uuidForm = (u: string) =>
      pick([u, u.toUpperCase(), u.replace(/-/g, ''), u.replace(/-/g, '').toUpperCase()])
    const prefixes = [
      '/api-gateway/api/v2/dtables/',
      '/API-Gateway/api/v2/dtables/',
      '/%61pi-gateway/api/v2/dtables/',
      '/api/v2.1/dtables/',
      '/api2/',
      '/Api2/',
      '/api/v1/',
      '/ping',
      '/api2/auth-token',
      '/api2/auth-token/',
      '/socket.io/',
      '/',
      '/media/',
    ]
    const tricks = [
      '',
      '.',
      '..',
      '%2e',
      '%2E%2e',
      '.%2e',
      '%2f',
      '%2F',
      '%5c',
      '\\',
      '//',
      '%00',
      '%zz',
      '%41',
      '%7e',
      'rows',
      'sql',
      'x%20y',
      '..%2f',
      '%252e',
    ]
    const methods = [
      'GET',
      'GET',
      'GET',
      'POST',
      'PUT',
      'DELETE',
      'PATCH',
      'HEAD',
      'OPTIONS',
      'PROPFIND',
    ]

    const cases: { id: number; path: string; method: string }[] = []
    for (let id = 0; id < 2500; id++) {
      let path = pick(prefixes)
      if (path.endsWith('dtables/')) path += uuidForm(pick(uuids))
      const extra = Math.floor(rand() * 4)
      for (let j = 0; j < extra; j++) path += '/' + pick(tricks)
      if (rand() < 0.3) path += '/'
      cases.push({ id, path, method: pick(methods) })
    }

    const statuses = new Map<number, number>()
    const queue = [...cases]
    const worker = async () => {
      for (let c = queue.shift(); c; c = queue.shift()) {
        const headers = [`Host: fuzz.example`, 'Connection: close']
        if (rand() < 0.3) headers.push(`X-Forwarded-For: 10.${Math.floor(rand() * 255)}.0.1`)
        if (rand() < 0.1) headers.push(`X-Weird: ${'v'.repeat(Math.floor(rand() * 2000))}`)
        let body = ''
        if (c.method !== 'GET' && c.method !== 'HEAD' && rand() < 0.7) {
          body = pick([
            '{"rows": []}',
            '{"rows": [1,2,3]}',
            '{not json',
            '',
            '{"sql": "SELECT * FROM t LIMIT 5"}',
            'x'.repeat(5000),
          ])
          headers.push(
            `Content-Length: ${Buffer.byteLength(body)}`,
            'Content-Type: application/json'
          )
        }
        const r = await raw(
          gw.port,
          `${c.method} ${c.path}?fuzz=${c.id} HTTP/1.1\r\n${headers.join('\r\n')}\r\n\r\n${body}`
        )
        statuses.set(c.id, r.status)
      }
    }
    await Promise.all(Array.from({ length: 8 }, worker))

    // The process is alive and healthy.
    expect(gw.proc.exitCode).toBeNull()
    expect((await send(gw.adminPort, { path: '/healthz' })).status).toBe(200)

    // Every request that reached the upstream was the normalised form of what was sent.
    const byId = new Map(cases.map((c) => [c.id, c]))
    const counted = new Map<string, number>()
    for (const seen of up.seen) {
      const m = /[?&]fuzz=(\d+)$/.exec(seen.url)
      if (!m) continue
      const sent = byId.get(Number(m[1]))!
      const got = seen.url.slice(0, seen.url.indexOf('?'))
      expect(got, `sent ${sent.path}`).toBe(oracleNormalize(sent.path))
      const { cls, key } = oracleClass(got)
      if (cls === 'base' || cls === 'account' || cls === 'auth_token') {
        const k = `${cls}|${key}`
        counted.set(k, (counted.get(k) ?? 0) + 1)
      }
    }
    // Paths the oracle refuses never reach the upstream, and get 400.
    for (const c of cases) {
      if (oracleNormalize(c.path) === null) expect(statuses.get(c.id), c.path).toBe(400)
    }
    // No key received more calls than its limit: nothing counted slipped through uncounted.
    // Its premise: every call was decided by the shared store. A store slower than its
    // timeout_ms sends calls to the local fallback, which counts afresh (SPEC §3 allows it):
    // CI's loaded box once saw 10 calls of a key of 5 so, with the default 100 ms, so the store
    // here has 5 s, and a fallback decision is named rather than read as a counting fault.
    const metrics = (await send(gw.adminPort, { path: '/metrics' })).body
    expect(metrics).toMatch(/^basegate_store_fallback_decisions_total 0$/m)
    for (const [k, n] of counted) {
      const cls = k.split('|')[0] as keyof typeof LIMITS
      expect(n, k).toBeLessThanOrEqual(LIMITS[cls])
    }
    // The fuzz really pushed keys over their limits (the check above had something to catch).
    expect([...statuses.values()].filter((s) => s === 429).length).toBeGreaterThan(100)
  }, 120_000)
})

describe('request smuggling and malformed requests', () => {
  it.each([
    [
      'Content-Length and Transfer-Encoding',
      'POST /api2/x HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled-1 HTTP/1.1\r\nHost: a\r\n\r\n',
    ],
    [
      'two different Content-Length',
      'POST /api2/x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabcGET /smuggled-2 HTTP/1.1\r\nHost: a\r\n\r\n',
    ],
    [
      'obfuscated Transfer-Encoding',
      'POST /api2/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\nContent-Length: 4\r\n\r\n1\r\nZ\r\nGET /smuggled-3 HTTP/1.1\r\nHost: a\r\n\r\n',
    ],
    [
      'space before the colon',
      'POST /api2/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\nGET /smuggled-4 HTTP/1.1\r\n\r\n',
    ],
    [
      'obs-fold header continuation',
      'GET /api2/x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n X-Injected: 1\r\n\r\n',
    ],
    ['a NUL in a header', 'GET /api2/x HTTP/1.1\r\nHost: a\r\nX-A: a\0b\r\n\r\n'],
  ])('%s: refused by the parser, nothing smuggled through', async (_name, bytes) => {
    const before = up.seen.length
    const r = await raw(gw.port, bytes)
    expect([400, 0]).toContain(r.status)
    const after = up.seen.slice(before)
    expect(after.some((s) => s.url.includes('smuggled'))).toBe(false)
    expect(after.some((s) => 'x-injected' in s.headers)).toBe(false)
  })

  it('an encoded CR LF stays encoded: it never becomes a header upstream', async () => {
    const before = up.seen.length
    const r = await raw(
      gw.port,
      'GET /api2/ping/?a=%0d%0aX-Injected:%201 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'
    )
    expect(r.status).toBe(200)
    const seen = up.seen.slice(before)
    expect(seen).toHaveLength(1)
    expect(seen[0]!.url).toBe('/api2/ping/?a=%0d%0aX-Injected:%201')
    expect('x-injected' in seen[0]!.headers).toBe(false)
  })

  it('oversized headers get 431 and are not forwarded', async () => {
    const before = up.seen.length
    const r = await raw(
      gw.port,
      `GET /api2/x HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`
    )
    expect(r.status).toBe(431)
    expect(up.seen.length).toBe(before)
  })
})

describe('slowloris', () => {
  /** Writes `head`, then one `tick` every `everyMs`; resolves with when the server closed the socket. */
  function timeToClose(
    head: string,
    tick: string,
    everyMs: number,
    giveUpMs: number
  ): Promise<number> {
    const t0 = Date.now()
    return new Promise((resolve) => {
      const sock = connect(gw.port, '127.0.0.1')
      sock.on('error', () => {})
      sock.write(head)
      const timer = setInterval(() => sock.writable && sock.write(tick), everyMs)
      sock.on('close', () => {
        clearInterval(timer)
        resolve(Date.now() - t0)
      })
      setTimeout(() => sock.destroy(), giveUpMs)
    })
  }

  it('closes a client that trickles its headers', async () => {
    const closed = await timeToClose(
      'GET /api2/x HTTP/1.1\r\nHost: a\r\n',
      'X-Slow: 1\r\n',
      100,
      10_000
    )
    expect(closed).toBeLessThan(3000) // headers_timeout_ms 500, checked every ~125 ms
    expect(closed).toBeGreaterThanOrEqual(400)
  })

  it('closes a client that trickles its body', async () => {
    const closed = await timeToClose(
      'POST /seafhttp/upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n',
      'x',
      200,
      15_000
    )
    expect(closed).toBeLessThan(6000) // request_timeout_ms 2000
  })
})

describe('key-space floods', () => {
  it('random base UUIDs leave one bounded key each, all expiring within a window', async () => {
    const rand = rng(7)
    const hex = (n: number) =>
      Array.from({ length: n }, () => Math.floor(rand() * 16).toString(16)).join('')
    for (let i = 0; i < 300; i++) {
      await raw(
        gw.port,
        `GET /api-gateway/api/v2/dtables/${hex(8)}-${hex(4)}-4${hex(3)}-8${hex(3)}-${hex(12)}/rows/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`
      )
    }
    const r = new Redis(redis.url)
    try {
      const keys: string[] = []
      let cursor = '0'
      do {
        const [next, batch] = await r.scan(cursor, 'MATCH', `${redis.prefix}{b:*`, 'COUNT', 1000)
        cursor = next
        keys.push(...batch)
      } while (cursor !== '0')
      expect(keys.length).toBeGreaterThanOrEqual(300)
      for (const k of keys.slice(0, 400)) {
        const ttl = await r.pttl(k)
        expect(ttl).toBeGreaterThan(0)
        expect(ttl).toBeLessThanOrEqual(62_400)
        expect(await r.hlen(k)).toBeLessThanOrEqual(53) // 51 buckets, the total, the oldest
      }
    } finally {
      r.disconnect()
    }
  }, 60_000)

  it('random IPv6 clients behind a trusted proxy are grouped per /64, and the ceiling stops one client', async () => {
    const g = await startGateway(
      testYaml(
        up.url,
        `client_ip: { trusted_proxies: [127.0.0.0/8] }\nrate_limits: { account: 3/min, ip_ceiling: 4/min }`
      )
    )
    try {
      const rand = rng(99)
      const h = () => Math.floor(rand() * 65536).toString(16)
      const statuses: number[] = []
      // One subscriber rotating addresses inside its /64: counted as one client.
      for (let i = 0; i < 6; i++) {
        statuses.push(
          (
            await send(g.port, {
              path: '/api2/repos/',
              headers: { 'x-forwarded-for': `2001:db8:aa:bb:${h()}:${h()}:${h()}:${h()}` },
            })
          ).status
        )
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429, 429])
      // Rotating bases does not escape the ceiling.
      const rotating: number[] = []
      for (let i = 0; i < 6; i++) {
        const u = `${(0x5000 + i).toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
        rotating.push(
          (
            await send(g.port, {
              path: `/api-gateway/api/v2/dtables/${u}/rows/`,
              headers: { 'x-forwarded-for': '2001:db8:cc:dd::1' },
            })
          ).status
        )
      }
      expect(rotating).toEqual([200, 200, 200, 200, 429, 429])
    } finally {
      await g.stop()
    }
  })
})
