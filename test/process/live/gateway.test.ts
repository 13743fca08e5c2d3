import { createHash } from 'node:crypto'
import { request } from 'node:http'
import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { useLive } from '../../helpers/live.js'
import { rowsPath, send, UUID } from '../../helpers/http.js'

const live = useLive((up) =>
  testYaml(
    up.url,
    `rate_limits: { base: 5/min, account: 4/min }
exempt: [/ping, /server-info, /api2/ping, /api-gateway/api/v2/ping]`
  )
)

const uuid = (n: number) => `${n.toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`

describe('rate limits through the real listeners (served in process)', () => {
  it('sends the three headers on gateway calls, then a bare 429 with retry-after', async () => {
    const path = rowsPath(uuid(1))
    const remaining: string[] = []
    let reset = ''
    for (let i = 0; i < 5; i++) {
      const a = await send(live.gw.port, { path })
      expect(a.status).toBe(200)
      expect(a.headers['x-ratelimit-limit']).toBe('5')
      remaining.push(a.headers['x-ratelimit-remaining'] as string)
      reset = a.headers['x-ratelimit-reset'] as string
    }
    expect(remaining).toEqual(['4', '3', '2', '1', '0'])
    const now = Date.now() / 1000
    expect(Number(reset)).toBeGreaterThan(now + 59)
    expect(Number(reset)).toBeLessThanOrEqual(Math.ceil(now + 60 + 1.2 + 1))

    const refused = await send(live.gw.port, { path })
    expect(refused.status).toBe(429)
    expect(refused.body).toBe('')
    expect(refused.headers['content-length']).toBe('0')
    expect(refused.headers['x-ratelimit-remaining']).toBe('0')
    expect(refused.headers['x-ratelimit-limit']).toBe('5')
    const ra = Number(refused.headers['retry-after'])
    expect(ra).toBeGreaterThanOrEqual(59)
    expect(ra).toBeLessThanOrEqual(62)
    expect(Number(refused.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(
      Math.floor(now + 59)
    )
  })

  it('counts bases separately and every UUID form of one base together', async () => {
    const u = uuid(2)
    const forms = [u, u.toUpperCase(), u.replace(/-/g, ''), u.replace(/-/g, '').toUpperCase(), u]
    for (const f of forms)
      expect((await send(live.gw.port, { path: rowsPath(f) })).status).toBe(200)
    expect((await send(live.gw.port, { path: rowsPath(u.toUpperCase()) })).status).toBe(429)
    // Another base is untouched.
    const other = await send(live.gw.port, { path: rowsPath(uuid(3)) })
    expect(other.status).toBe(200)
    expect(other.headers['x-ratelimit-remaining']).toBe('4')
  })

  it('counts account calls per IP and does not believe an untrusted X-Forwarded-For', async () => {
    const seenBefore = live.up.seen.length
    for (let i = 0; i < 4; i++) {
      const a = await send(live.gw.port, {
        path: '/api/v2.1/user/',
        headers: { 'x-forwarded-for': `10.0.0.${i}` },
      })
      expect(a.status).toBe(200)
      // headers: gateway puts no x-ratelimit-* on account calls
      expect(a.headers['x-ratelimit-limit']).toBeUndefined()
    }
    const spoofed = await send(live.gw.port, {
      path: '/api2/repos/',
      headers: { 'x-forwarded-for': '203.0.113.77' },
    })
    expect(spoofed.status).toBe(429)
    // The spoofed list is kept and our hop appended.
    expect(live.up.seen[seenBefore]!.headers['x-forwarded-for']).toBe('10.0.0.0, 127.0.0.1')
  })

  it('exempt paths carry no headers and are never counted', async () => {
    for (let i = 0; i < 10; i++) {
      const a = await send(live.gw.port, { path: '/api2/ping/' })
      expect(a.status).toBe(200)
      expect(a.body).toBe('"pong"')
      expect(a.headers['x-ratelimit-limit']).toBeUndefined()
    }
    expect(
      (await send(live.gw.port, { path: '/PING' })).headers['x-ratelimit-limit']
    ).toBeUndefined()
  })
})

describe('path normalisation: what was classified is what is served', () => {
  it('resolves dot segments and double slashes before classifying, and forwards that path', async () => {
    const a = await send(live.gw.port, {
      path: `/ping/../api-gateway//api/v2/dtables/${uuid(4)}/./rows/?table_name=T&x=%2F`,
    })
    expect(a.status).toBe(200)
    // Classified as a gateway call (headers present), not as the exempt /ping.
    expect(a.headers['x-ratelimit-limit']).toBe('5')
    expect(live.up.seen.at(-1)!.url).toBe(
      `/api-gateway/api/v2/dtables/${uuid(4)}/rows/?table_name=T&x=%2F`
    )
  })

  it('decodes unreserved percent-encodings, so an encoded prefix is still counted', async () => {
    await send(live.gw.port, { path: `/%61pi-gateway/api/v2/dtables/${uuid(5)}/rows/` })
    expect(live.up.seen.at(-1)!.url).toBe(`/api-gateway/api/v2/dtables/${uuid(5)}/rows/`)
  })

  it.each([
    `/api-gateway/api/v2/dtables/${UUID}%2Frows/`,
    '/api2%5Cping',
    '/../api2/ping',
    '/a/%2e%2e/%2e%2e/api2/',
  ])('refuses %s with 400 and a JSON error_msg', async (path) => {
    const before = live.up.seen.length
    const a = await send(live.gw.port, { path })
    expect(a.status).toBe(400)
    expect(a.headers['content-type']).toContain('application/json')
    expect(JSON.parse(a.body).error_msg).toEqual(expect.any(String))
    expect(live.up.seen.length).toBe(before)
  })
})

describe('forwarding', () => {
  it('keeps method, Host, query and body; drops hop-by-hop; appends X-Forwarded-*', async () => {
    live.up.handle((req, res) => {
      let n = 0
      req.on('data', (c: Buffer) => (n += c.length))
      req.on('end', () => {
        res.writeHead(201, {
          'content-type': 'application/json',
          connection: 'x-up-hop',
          'x-up-hop': '1',
          'x-kept': 'yes',
          'set-cookie': ['a=1', 'b=2'],
        })
        res.end(JSON.stringify({ n }))
      })
    })
    try {
      const body = JSON.stringify({ table_name: 'T', rows: [{ Name: 'x' }] })
      const a = await send(live.gw.port, {
        method: 'POST',
        path: `/api-gateway/api/v2/dtables/${uuid(6)}/rows/?a=1&b=%20`,
        headers: {
          host: 'tables.example.com',
          'content-type': 'application/json',
          connection: 'keep-alive, x-client-hop',
          'x-client-hop': 'secret',
          'keep-alive': 'timeout=5',
          te: 'trailers',
          'proxy-authorization': 'Basic abc',
          'x-forwarded-proto': 'https',
        },
        body,
      })
      expect(a.status).toBe(201)
      expect(JSON.parse(a.body)).toEqual({ n: Buffer.byteLength(body) })
      expect(a.headers['x-kept']).toBe('yes')
      expect(a.headers['x-up-hop']).toBeUndefined()
      expect(a.headers['set-cookie']).toEqual(['a=1', 'b=2'])
      const seen = live.up.seen.at(-1)!
      expect(seen.method).toBe('POST')
      expect(seen.url).toBe(`/api-gateway/api/v2/dtables/${uuid(6)}/rows/?a=1&b=%20`)
      expect(seen.headers.host).toBe('tables.example.com')
      for (const h of ['x-client-hop', 'keep-alive', 'te', 'proxy-authorization'])
        expect(seen.headers[h]).toBeUndefined()
      expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1')
      expect(seen.headers['x-forwarded-proto']).toBe('https, http')
      expect(seen.headers['x-forwarded-host']).toBe('tables.example.com')
    } finally {
      live.up.handle(null)
    }
  })

  it('keeps upstream connections alive and pooled', async () => {
    const sockets = new Set<unknown>()
    const onConnection = (sock: unknown) => sockets.add(sock)
    live.up.server.on('connection', onConnection)
    try {
      for (let i = 0; i < 40; i++)
        expect((await send(live.gw.port, { path: '/api2/ping/' })).status).toBe(200)
      // 40 sequential calls, each from a new client connection, over one or two upstream ones.
      expect(sockets.size).toBeLessThanOrEqual(2)
    } finally {
      live.up.server.off('connection', onConnection)
    }
  })

  it('streams a large response without waiting for its end', async () => {
    let finish!: () => void
    live.up.handle((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' })
      res.write(Buffer.alloc(64 * 1024, 1))
      finish = () => {
        for (let i = 0; i < 160; i++) res.write(Buffer.alloc(64 * 1024, i & 0xff))
        res.end()
      }
    })
    try {
      const hash = createHash('sha256')
      let bytes = 0
      await new Promise<void>((resolve, reject) => {
        request(
          { port: live.gw.port, host: '127.0.0.1', path: '/seafhttp/files/big', agent: false },
          (res) => {
            let first = true
            res.on('data', (c: Buffer) => {
              bytes += c.length
              hash.update(c)
              // The first chunk arrived while the upstream has not finished: it is streamed.
              if (first) {
                first = false
                finish()
              }
            })
            res.on('end', resolve)
            res.on('error', reject)
          }
        ).end()
      })
      const expected = createHash('sha256')
      expected.update(Buffer.alloc(64 * 1024, 1))
      for (let i = 0; i < 160; i++) expected.update(Buffer.alloc(64 * 1024, i & 0xff))
      expect(bytes).toBe(161 * 64 * 1024)
      expect(hash.digest('hex')).toBe(expected.digest('hex'))
    } finally {
      live.up.handle(null)
    }
  })

  it('streams a large upload to the upstream as it arrives (once its first buffer_request_bytes came)', async () => {
    let gotFirst!: () => void
    const firstSeen = new Promise<void>((r) => (gotFirst = r))
    live.up.handle((req, res) => {
      const h = createHash('sha256')
      let n = 0
      req.on('data', (c: Buffer) => {
        if (n === 0) gotFirst()
        n += c.length
        h.update(c)
      })
      req.on('end', () => res.end(JSON.stringify({ n, sha: h.digest('hex') })))
    })
    try {
      const chunk = Buffer.alloc(256 * 1024, 7)
      const answer = new Promise<string>((resolve, reject) => {
        const req = request(
          {
            port: live.gw.port,
            host: '127.0.0.1',
            method: 'PUT',
            path: '/seafhttp/upload/x',
            agent: false,
            headers: { 'transfer-encoding': 'chunked' },
          },
          (res) => {
            let b = ''
            res.on('data', (c) => (b += c))
            res.on('end', () => resolve(b))
          }
        )
        req.on('error', reject)
        // SPEC §4: the first buffer_request_bytes (1 MiB) are read before a connection is taken.
        for (let i = 0; i < 5; i++) req.write(chunk)
        // The rest is sent only once the upstream has seen the first part.
        void firstSeen.then(() => {
          for (let i = 0; i < 95; i++) req.write(chunk)
          req.end()
        })
      })
      const got = JSON.parse(await answer)
      const expected = createHash('sha256')
      for (let i = 0; i < 100; i++) expected.update(chunk)
      expect(got).toEqual({ n: 100 * chunk.length, sha: expected.digest('hex') })
    } finally {
      live.up.handle(null)
    }
  })

  it('closes the client connection when the upstream drops it after the headers', async () => {
    live.up.handle((req, res) => {
      res.writeHead(200, { 'content-length': '100000' })
      res.write('partial')
      setTimeout(() => req.socket.destroy(), 50)
    })
    try {
      const outcome = await new Promise<string>((resolve) => {
        request(
          { port: live.gw.port, host: '127.0.0.1', path: '/media/x', agent: false },
          (res) => {
            res.on('data', () => {})
            res.on('end', () => resolve('ended'))
            res.on('error', () => resolve('error'))
            res.on('aborted', () => resolve('aborted'))
          }
        )
          .on('error', () => resolve('error'))
          .end()
      })
      expect(outcome).not.toBe('ended')
    } finally {
      live.up.handle(null)
    }
  })
})

describe('logs', () => {
  it('one line per request with the fields, refusals at warn, no secrets', async () => {
    const path = `/api-gateway/api/v2/dtables/${uuid(9)}/rows/`
    for (let i = 0; i < 6; i++) {
      await send(live.gw.port, {
        path: path + '?secret_query=s3cr3t',
        headers: { authorization: 'Bearer tok-SECRET-1', cookie: 'sessionid=COOKIE-SECRET' },
      })
    }
    const line = await live.gw.waitForLog((l) => l.path === path && l.status === 200)
    expect(line).toMatchObject({
      level: 'info',
      method: 'GET',
      class: 'base',
      key: `base:${uuid(9)}`, // hyphenated, as the client sent it (SPEC §7)
      limit: 5,
    })
    expect(line).toHaveProperty('remaining')
    expect(line).toHaveProperty('reset')
    expect(line).toHaveProperty('duration_ms')
    expect(line).toHaveProperty('upstream_ms')
    const refused = await live.gw.waitForLog((l) => l.path === path && l.status === 429)
    expect(refused.level).toBe('warn')
    const all = JSON.stringify(live.gw.logs)
    expect(all).not.toContain('tok-SECRET-1')
    expect(all).not.toContain('COOKIE-SECRET')
    expect(all).not.toContain('s3cr3t')
  })
})
