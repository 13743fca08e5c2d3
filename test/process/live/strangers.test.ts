import { createHash } from 'node:crypto'
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket, { WebSocketServer } from 'ws'
import { RedisUsageStore } from '../../../src/usage/store.js'
import { testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { startLive, useLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { freePort } from '../../helpers/ports.js'
import { spawnRedisServer, waitForPing } from '../../helpers/redis.js'
import { startStubUpstream, type StubUpstream } from '../../helpers/stub-upstream.js'
import { holds as until } from '../../helpers/until.js'
import { metricOf } from '../../helpers/metrics.js'

// Issue #46 (SPEC §4 as changed on 2026-11-28, "what strangers can hold"): each finding scaled
// down and named after it, against the real listeners (served in the test's process, issue #48)
// and real redis-servers, loopback addresses telling the clients apart.

const metric = async (gw: Gateway, name: string) => (await metricOf(gw.adminUrl, name)) || 0

/** A GET from `localAddress`: its status, body and time (0 when it failed). */
function timedGet(
  port: number,
  path: string,
  localAddress = '127.0.0.1'
): Promise<{ status: number; ms: number; body: Buffer }> {
  const started = performance.now()
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, localAddress, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          ms: performance.now() - started,
          body: Buffer.concat(chunks),
        })
      )
    })
    req.on('error', () =>
      resolve({ status: 0, ms: performance.now() - started, body: Buffer.alloc(0) })
    )
    req.end()
  })
}

/** A raw connection from `localAddress` that sends `head` and reads nothing (a slow reader). */
async function silentReader(port: number, localAddress: string, head: string): Promise<Socket> {
  const s = connect({ host: '127.0.0.1', port, localAddress })
  s.on('error', () => {})
  await new Promise<void>((r) => s.once('connect', () => r()))
  s.pause()
  s.write(head)
  return s
}

describe('finding 1: slow readers hold bytes, not the server connections', () => {
  let up: StubUpstream
  let gw: Gateway
  // Larger than what the loopback socket buffers take: the rest must wait in basegate.
  const big = Buffer.alloc(8 * 1024 * 1024)
  for (let i = 0; i < big.length; i++) big[i] = i % 251
  beforeAll(async () => {
    up = await startStubUpstream()
    up.handle((req: IncomingMessage, res: ServerResponse) => {
      if (req.url?.startsWith('/media/big')) {
        res.writeHead(200, {
          'content-type': 'application/octet-stream',
          'content-length': big.length,
        })
        res.end(big)
      } else res.end('{"ok":true}')
    })
    // 16 upstream connections, 2 per client: 8 addresses reading slowly could hold them all.
    gw = await startLive(
      testYaml(up.url, 'rate_limits: { other: unlimited }').replace(
        /^upstream: .*$/m,
        `upstream: { url: "${up.url}", max_connections: 16 }`
      )
    )
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('8 addresses × 4 GETs of a large answer read at no pace: a ninth client’s GET is answered in its usual time; the answers wait in memory and on disk, whole', async () => {
    const usual = await timedGet(gw.port, '/api2/ping/')
    const readers: Socket[] = []
    for (let a = 0; a < 8; a++)
      for (let i = 0; i < 4; i++)
        readers.push(
          await silentReader(
            gw.port,
            `127.0.0.${10 + a}`,
            `GET /media/big/${a}-${i} HTTP/1.1\r\nhost: x\r\n\r\n`
          )
        )
    // Every answer was read from the server as fast as it came (what the readers did not take
    // waits in memory and in temporary files): no server connection stays taken.
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) > 0)
    await until(async () => (await metric(gw, 'basegate_upstream_connections_in_use')) === 0)
    const ninth = await timedGet(gw.port, '/media/small', '127.0.0.30')
    expect(ninth.status).toBe(200)
    expect(ninth.ms).toBeLessThan(usual.ms + 1000)
    // A reader that reads on gets its whole answer, byte for byte.
    const r = readers[0]!
    const chunks: Buffer[] = []
    r.on('data', (c: Buffer) => chunks.push(c))
    r.resume()
    await until(() => Buffer.concat(chunks).length >= big.length + 100, 20_000)
    const whole = Buffer.concat(chunks)
    const body = whole.subarray(whole.indexOf('\r\n\r\n') + 4)
    expect(createHash('sha256').update(body).digest('hex')).toBe(
      createHash('sha256').update(big).digest('hex')
    )
    for (const s of readers) s.destroy()
    // What they held is freed when they go.
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) === 0)
    expect(await metric(gw, 'basegate_body_buffered_bytes')).toBe(0)
  }, 30_000)
})

describe('finding 2: uploads that send no byte hold no server connection', () => {
  const live = useLive((up) =>
    testYaml(up.url, 'rate_limits: { account: unlimited, other: unlimited }').replace(
      /^upstream: .*$/m,
      `upstream: { url: "${up.url}", max_connections: 16 }`
    )
  )

  it('6 addresses × 8 heads announcing 100 MB and no byte; another client’s 3 MB upload is forwarded whole, and a phone at 20 KiB/s is served', async () => {
    const heads: Socket[] = []
    for (let a = 0; a < 6; a++)
      for (let i = 0; i < 8; i++) {
        const s = connect({
          host: '127.0.0.1',
          port: live.gw.port,
          localAddress: `127.0.0.${40 + a}`,
        })
        s.on('error', () => {})
        await new Promise<void>((r) => s.once('connect', () => r()))
        s.write(
          `POST /seafhttp/upload-api/${a}-${i} HTTP/1.1\r\nhost: x\r\ncontent-type: application/octet-stream\r\ncontent-length: 100000000\r\n\r\n`
        )
        heads.push(s)
      }
    // A proof of absence: no event says "still nothing sent upstream"; 300 ms is many turns of
    // the gateway's loop after the last head.
    await new Promise((r) => setTimeout(r, 300))
    expect(await metric(live.gw, 'basegate_upstream_connections_in_use')).toBe(0)
    expect(live.up.seen.some((x) => x.url.includes('/upload-api/'))).toBe(false)
    // Another client's 3 MB upload: read ahead, then forwarded, every byte.
    const body = Buffer.alloc(3 * 1024 * 1024, 9)
    const r = await send(live.gw.port, {
      method: 'POST',
      path: '/seafhttp/upload-api/real',
      headers: { 'content-type': 'application/octet-stream' },
      body,
    })
    expect(r.status).toBe(200)
    expect(live.up.seen.find((x) => x.url === '/seafhttp/upload-api/real')?.bytes).toBe(body.length)
    for (const s of heads) s.destroy()
    // SPEC §4 min_body_rate: the average since the first byte (8 KiB/s by default), judged
    // from the 10th second: a phone at 20 KiB/s, 12 s, is never cut.
    const phone = await new Promise<number>((resolve) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: live.gw.port,
          method: 'POST',
          path: '/seafhttp/upload-api/phone',
          agent: false,
          headers: { 'content-type': 'image/jpeg', 'content-length': 12 * 20 * 1024 },
        },
        (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode!))
        }
      )
      req.on('error', () => resolve(0))
      let sent = 0
      const t = setInterval(() => {
        req.write(Buffer.alloc(20 * 1024, 1))
        if (++sent === 12) {
          clearInterval(t)
          req.end()
        }
      }, 1000)
    })
    expect(phone).toBe(200)
    expect(live.up.seen.find((x) => x.url === '/seafhttp/upload-api/phone')?.bytes).toBe(
      12 * 20 * 1024
    )
  }, 40_000)
})

describe('finding 3: nothing a stranger sends outlives its window', () => {
  const live = useLive(
    (up, _cluster, redis) =>
      testYaml(
        up.url,
        `store: { url: "${redis!.url}", prefix: "${redis!.prefix}str:" }\nrate_limits: { base: 1000/min }`
      ),
    { redis: true, env: { BASEGATE_USAGE_FLUSH_MS: '200', BASEGATE_REPORT_FLUSH_MS: '200' } }
  )
  let client: Redis
  beforeAll(() => void (client = new Redis(live.redis.url)))
  afterAll(() => client?.disconnect())

  /** The keys of this gateway that outlive an hour (no expiry, or one past an hour from now). */
  async function longLived(): Promise<string[]> {
    const out: string[] = []
    let cursor = '0'
    do {
      const [next, found] = await client.scan(
        cursor,
        'MATCH',
        `${live.redis.prefix}str:*`,
        'COUNT',
        1000
      )
      cursor = next
      for (const k of found) {
        const ttl = await client.pttl(k)
        if (ttl === -1 || ttl > 3_600_000) out.push(k)
      }
    } while (cursor !== '0')
    return out.sort()
  }

  async function oneOff(from: number, n: number): Promise<void> {
    const hex = (i: number) => i.toString(16).padStart(8, '0')
    for (let i = from; i < from + n; i += 25)
      await Promise.all(
        Array.from({ length: 25 }, (_, j) =>
          send(live.gw.port, {
            path: `/api-gateway/api/v2/dtables/${hex(i + j)}-0d3b-4c59-9a51-3e2d7c8b9a10/rows/`,
          })
        )
      )
  }

  /** The day's others count of the base class, as the store holds it. */
  async function othersToday(): Promise<number> {
    const month = new Date().toISOString().slice(0, 7)
    const day = new Date().toISOString().slice(8, 10)
    return Number((await client.hget(`${live.redis.prefix}str:{u:o:base}:days:${month}`, day)) ?? 0)
  }

  it('1,000 one-off bases leave a constant number of long-lived store keys (their calls in one others count); 1,000 more add none', async () => {
    await oneOff(0, 1000)
    await until(async () => (await othersToday()) >= 1000)
    const first = await longLived()
    expect(first.length).toBeLessThanOrEqual(20)
    await oneOff(1000, 1000)
    await until(async () => (await othersToday()) >= 2000)
    expect(await longLived()).toEqual(first)
    // Their days are in the export as one others row, not 2,000 bases.
    const csv = await (await fetch(`${live.gw.adminUrl}/v1/usage/export?format=csv`)).text()
    const today = new Date().toISOString().slice(0, 10)
    expect(csv).toContain(`${today},others,base,,2000,0`)
    expect(csv.split('\n').filter((l) => l.split(',')[1] === 'base').length).toBe(0)
  }, 60_000)

  it('a base past usage.keep_after calls in a day is kept by name from that call on', async () => {
    const u = 'abcdef01-0d3b-4c59-9a51-3e2d7c8b9a10'
    for (let i = 0; i < 105; i++)
      await send(live.gw.port, { path: `/api-gateway/api/v2/dtables/${u}/rows/` })
    const today = new Date().toISOString().slice(0, 10)
    await until(async () => {
      const h = await (
        await fetch(`${live.gw.adminUrl}/v1/usage/history?base=${u}&from=${today}`)
      ).json()
      return (h as { days: { calls: number }[] }).days.at(-1)!.calls >= 6
    })
    const h = (await (
      await fetch(`${live.gw.adminUrl}/v1/usage/history?base=${u}&from=${today}`)
    ).json()) as {
      days: { calls: number }[]
    }
    // Its 100th call made it worth keeping: that call and the 5 after it are its own.
    expect(h.days.at(-1)!.calls).toBe(6)
  }, 30_000)
})

describe('finding 3: a store that refuses writes is a store failure, with its own words', () => {
  let up: StubUpstream
  let gw: Gateway
  let port: number
  let client: Redis
  beforeAll(async () => {
    up = await startStubUpstream()
    port = await freePort()
    spawnRedisServer(port, ['--maxmemory-policy', 'noeviction'])
    await waitForPing(`redis://127.0.0.1:${port}`)
    client = new Redis(`redis://127.0.0.1:${port}`, { retryStrategy: () => null })
    client.on('error', () => {})
    gw = await startLive(
      testYaml(up.url, `store: { url: "redis://127.0.0.1:${port}", on_error: open }`)
    )
  })
  afterAll(async () => {
    await gw?.stop()
    await client.shutdown('NOSAVE').catch(() => {})
    client.disconnect()
    await up?.close()
  })

  it('a Redis at maxmemory with noeviction answers OOM: /readyz says "down", /v1/status and the page say the store’s words, basegate_store_up is 0; freed, it is up again', async () => {
    const rows = '/api-gateway/api/v2/dtables/6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10/rows/'
    expect((await send(gw.port, { path: rows })).status).toBe(200)
    expect((await (await fetch(`${gw.adminUrl}/readyz`)).json()).store).toBe('up')
    // Full: 4 MB held and maxmemory under it, so every write is refused (as a flood left it).
    const chunk = 'x'.repeat(64 * 1024)
    for (let i = 0; i < 64; i++) await client.set(`fill:${i}`, chunk)
    await client.config('SET', 'maxmemory', '2mb')
    await expect(client.set('one-more', 'x')).rejects.toThrow(/OOM/)
    // Calls are still answered (on_error: open limits alone), and each says the store failed.
    for (let i = 0; i < 3; i++) expect((await send(gw.port, { path: rows })).status).toBe(200)
    const ready = await fetch(`${gw.adminUrl}/readyz`)
    expect(ready.status).toBe(200)
    expect(((await ready.json()) as { store: string }).store).toBe('down')
    const status = (await (await fetch(`${gw.adminUrl}/v1/status`)).json()) as {
      store: { state: string; error: string }
      alerts: { kind: string; text: string }[]
    }
    expect(status.store.state).toBe('failing')
    expect(status.store.error).toMatch(/OOM/)
    expect(status.alerts.find((a) => a.kind === 'store')?.text).toMatch(/OOM/)
    expect(await metric(gw, 'basegate_store_up')).toBe(0)
    const line = await gw.waitForLog((l) => l.msg === 'store unavailable')
    expect(String(line.error)).toMatch(/OOM/)
    // Freed: the probe (every 5 s) and the next calls find it answering again.
    await client.config('SET', 'maxmemory', '0')
    await until(async () => {
      await send(gw.port, { path: rows })
      return (await metric(gw, 'basegate_store_up')) === 1
    }, 15_000)
    expect((await (await fetch(`${gw.adminUrl}/readyz`)).json()).store).toBe('up')
    await gw.waitForLog((l) => l.msg === 'store available again')
  }, 30_000)
})

describe('finding 5: a few addresses cannot take every client connection', () => {
  const live = useLive((up) =>
    testYaml(up.url, '').replace(
      /^listen: .*$/m,
      'listen: { host: 127.0.0.1, port: 0, max_connections: 30, max_connections_per_client: 10 }'
    )
  )

  it('three addresses holding the total: a fourth is served (an idle connection of the one holding the most yields); a connection past the per-client cap that sends nothing is closed at once', async () => {
    const idle: Socket[] = []
    for (let a = 0; a < 3; a++)
      for (let i = 0; i < 10; i++) {
        const s = connect({
          host: '127.0.0.1',
          port: live.gw.port,
          localAddress: `127.0.0.${50 + a}`,
        })
        s.on('error', () => {})
        s.resume()
        await new Promise<void>((r) => s.once('connect', () => r()))
        idle.push(s)
      }
    await until(async () => (await metric(live.gw, 'basegate_connections_open')) >= 30)
    expect(await metric(live.gw, 'basegate_connections_open')).toBe(30)
    const fourth = await timedGet(live.gw.port, '/api2/ping/', '127.0.0.60')
    expect(fourth.status).toBe(200)
    expect(await metric(live.gw, 'basegate_connections_yielded_total')).toBeGreaterThanOrEqual(1)
    // Past .50's own cap, sending nothing: closed within 100 ms, not the 1 s a head may take.
    const past = connect({ host: '127.0.0.1', port: live.gw.port, localAddress: '127.0.0.51' })
    past.on('error', () => {})
    past.resume()
    const t0 = performance.now()
    await new Promise<void>((r) => past.once('close', () => r()))
    expect(performance.now() - t0).toBeLessThan(900)
    for (const s of idle) s.destroy()
  }, 20_000)
})

describe('finding 6: only WebSockets on the socket paths are tunnelled, idle tunnels close, tunnels are capped', () => {
  let gw: Gateway
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => res.end('http'))
  const seen: string[] = []
  server.on('request', (req: IncomingMessage) => seen.push(req.url!))
  const wss = new WebSocketServer({ server, path: '/socket.io/' })
  wss.on('connection', (ws) => ws.on('message', (m) => ws.send(m.toString())))
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    gw = await startLive(
      testYaml(url, 'rate_limits: { other: unlimited }').replace(
        /^upstream: .*$/m,
        `upstream: { url: "${url}", max_connections: 4, tunnel_idle_ms: 600 }`
      )
    )
  })
  afterAll(async () => {
    await gw?.stop()
    wss.close()
    server.close()
  })

  const raw = (head: string) =>
    new Promise<string>((resolve) => {
      const s = connect(gw.port, '127.0.0.1')
      let got = ''
      s.on('data', (d) => (got += d.toString('latin1')))
      s.on('close', () => resolve(got))
      s.on('error', () => resolve(got))
      s.write(head)
      setTimeout(() => s.destroy(), 2000)
    })

  it('Upgrade: h2c, and a WebSocket off the socket paths, get 400 and nothing is forwarded', async () => {
    // (The gateway's own /server-info/ reads are not these calls.)
    const forwarded = () => seen.filter((u) => !u.startsWith('/server-info')).length
    const before = forwarded()
    const h2c = await raw(
      'GET /socket.io/ HTTP/1.1\r\nhost: x\r\nconnection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n'
    )
    expect(h2c).toMatch(/^HTTP\/1\.1 400 /)
    const off = await raw(
      'GET /api-gateway/api/v2/dtables/6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10/metadata/ HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'
    )
    expect(off).toMatch(/^HTTP\/1\.1 400 /)
    expect(forwarded()).toBe(before)
  })

  it('a tunnel with no byte either way for tunnel_idle_ms is closed; past upstream.max_tunnels a third gets 503', async () => {
    const open = () =>
      new Promise<WebSocket | number>((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${gw.port}/socket.io/`)
        ws.on('open', () => resolve(ws))
        ws.on('unexpected-response', (_r, res) => resolve(res.statusCode!))
        ws.on('error', () => {})
      })
    const a = (await open()) as WebSocket
    const b = (await open()) as WebSocket
    // max_connections 4: at most 2 tunnels.
    expect(await open()).toBe(503)
    const closed = await new Promise<number>((resolve) => {
      const t0 = performance.now()
      a.on('close', () => resolve(performance.now() - t0))
    })
    expect(closed).toBeGreaterThan(300)
    expect(closed).toBeLessThan(3000)
    b.close()
    // Their places are given back: a new tunnel opens (once b's close has reached the gateway).
    let c: WebSocket | number = 0
    await until(async () => (c = await open()) instanceof WebSocket)
    ;(c as unknown as WebSocket).close()
  }, 15_000)
})

describe('finding 8 and issue #46 item 10: what the gateway reads and says stays its own', () => {
  const live = useLive(
    (up) =>
      testYaml(
        `${up.url}/?key=s3cret-key&api_key=s3cret-api`,
        'store: { prefix: "${BG_SECRET_PREFIX}:" }'
      ),
    { env: { BG_SECRET_PREFIX: 'hunter2-prefix' } }
  )

  const tune = (body: string) =>
    fetch(`${live.gw.adminUrl}/v1/tuning`, { method: 'POST', body }).then(async (r) => ({
      status: r.status,
      body: (await r.json()) as { error_msg: string; problems?: string[] },
    }))

  it('a candidate reading a variable the running file reads gets its problems without the value; one reading another variable finds it unset', async () => {
    const a = await tune('rate_limits: { base: "${BG_SECRET_PREFIX}" }')
    expect(a.status).toBe(400)
    expect(JSON.stringify(a.body)).not.toContain('hunter2')
    expect(a.body.problems?.join('\n')).toContain('${BG_SECRET_PREFIX}')
    const b = await tune('rate_limits: { base: "${HOME}" }')
    expect(b.status).toBe(400)
    expect(b.body.problems?.join('\n')).toMatch(/\$\{HOME\} is not set/)
  })

  it('billion laughs, nesting past 100 levels and a body over 1 MiB get 400 naming the bound', async () => {
    const laughs =
      'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' +
      Array.from(
        { length: 9 },
        (_, i) =>
          `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9)
            .fill('*' + String.fromCharCode(97 + i))
            .join(',')}]`
      ).join('\n')
    const l = await tune(laughs)
    expect(l.status).toBe(400)
    expect(l.body.problems?.join('\n')).toMatch(/aliases expand past 10000 nodes/)
    const deep = await tune('x: ' + '['.repeat(150) + ']'.repeat(150))
    expect(deep.status).toBe(400)
    expect(deep.body.problems?.join('\n')).toMatch(/nest past 100 levels/)
    // (Its own connection: the admin listener answers before reading it all, and closes.)
    const huge = await send(live.gw.adminPort, {
      method: 'POST',
      path: '/v1/tuning',
      body: '#' + 'x'.repeat(1024 * 1024 + 1),
    })
    expect(huge.status).toBe(400)
    expect(JSON.parse(huge.body).error_msg).toMatch(/over 1048576 bytes/)
    // The gateway still serves.
    expect((await fetch(`${live.gw.adminUrl}/healthz`)).status).toBe(200)
  })

  it('?key= and ?api_key= of upstream.url are masked in /v1/config and the log', async () => {
    const config = await (await fetch(`${live.gw.adminUrl}/v1/config`)).text()
    expect(config).not.toContain('s3cret')
    expect(config).toContain('key=****')
    expect(JSON.stringify(live.gw.logs)).not.toContain('s3cret')
  })

  it('Transfer-Encoding: gzip, chunked is 501 and nothing is forwarded', async () => {
    const before = live.up.seen.length
    const answer = await new Promise<string>((resolve) => {
      const s = connect(live.gw.port, '127.0.0.1')
      let got = ''
      s.on('data', (d) => (got += d.toString('latin1')))
      s.on('close', () => resolve(got))
      s.on('error', () => resolve(got))
      s.write(
        'POST /api/v2.1/x/ HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'
      )
      setTimeout(() => s.destroy(), 2000)
    })
    expect(answer).toMatch(/^HTTP\/1\.1 501 /)
    expect(live.up.seen.length).toBe(before)
  })
})

describe('finding 9: the export streams whatever the number of bases', () => {
  const live = useLive(
    (up, _cluster, redis) =>
      testYaml(
        up.url,
        `store: { url: "${redis!.url}", prefix: "${redis!.prefix}exp:" }\nmonthly:\n  plans: { p: { calls: 100 } }\n  teams: [ { id: "=cmd|' /C calc'!A0", plan: p, bases: ["6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10"] } ]`
      ),
    { redis: true }
  )

  it('100,001 bases of a month: one answer, every base a row; a cell a spreadsheet would run starts with a quote', async () => {
    const client = new Redis(live.redis.url)
    try {
      const store = new RedisUsageStore(client, `${live.redis.prefix}exp:`)
      const now = new Date()
      const day = now.toISOString().slice(0, 10)
      const monthEndMs = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)
      const counts = new Map<string, number>()
      for (let i = 0; i < 100_001; i++) counts.set(i.toString(16).padStart(32, '0'), 1)
      await store.add(new Map([[day, { monthEndMs, counts }]]), { instance: 't', seq: 1 })
    } finally {
      client.disconnect()
    }
    await send(live.gw.port, {
      path: '/api-gateway/api/v2/dtables/6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10/rows/',
      headers: { 'x-request-id': 'export-100001' },
    })
    // A call is counted before its line is written, and an export writes out what was counted
    // first: once the line is there, one export holds the call.
    await live.gw.waitForLog((l) => l.request_id === 'export-100001')
    const r = await fetch(`${live.gw.adminUrl}/v1/usage/export?format=csv`)
    expect(r.status).toBe(200)
    const text = await r.text()
    const lines = text.trim().split('\n')
    expect(lines[0]).toBe('date,kind,id,team,calls,credited')
    // Every one-off base of the store, and the team's base the call above used.
    const bases = lines.filter((l) => l.split(',')[1] === 'base')
    expect(bases.filter((l) => !l.includes('6f1c2a4e-')).length).toBe(100_001)
    // The team's id begins with =: written with a leading quote (OWASP), quoted for its comma-free text.
    expect(text).toContain(",team,'=cmd")
    const json = (await (await fetch(`${live.gw.adminUrl}/v1/usage/export`)).json()) as {
      rows: unknown[]
    }
    expect(json.rows.length).toBeGreaterThanOrEqual(100_001)
  }, 60_000)
})
