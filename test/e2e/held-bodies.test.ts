import { mkdtempSync, readdirSync, readlinkSync } from 'node:fs'
import { request, type ClientRequest } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'
import { holds as until } from '../helpers/until.js'

// Issue #31 items 1 and 4, issue #39 item 1 (SPEC §4 "Held bodies are bounded, and a head
// alone holds nothing", `100 Continue`): the scenarios scaled down. Per process: 400 kB in
// memory, of which the last 300 kB (max_body_bytes) are kept for clients that hold nothing,
// 800 kB in temporary files, one client at most half of the two (600 kB); a body must arrive
// whole within 1.5 s. Clients are told apart by their loopback address (127.0.0.1 to .6).

const LIMITS =
  'size_limits: { buffer_bytes: 400000, spill_bytes: 800000, client_share: 1/2, body_timeout_ms: 1500, max_body_bytes: 300000, min_body_rate: 0 }\nrate_limits: { base: 1000/min }'
const BODY = 250_000
let n = 0
const freshBase = () =>
  `6f1c2a4e-0d3b-4c59-9a51-${(0x3e2d7c8b0000 + ++n).toString(16).padStart(12, '0')}`
const rowsOf = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`

/** A JSON append of exactly `size` bytes (one row with a long string). */
function appendBody(size: number): Buffer {
  const head = '{"table_name":"T","rows":[{"N":"'
  const tail = '"}]}'
  return Buffer.from(head + 'x'.repeat(size - head.length - tail.length) + tail)
}

interface Held {
  req: ClientRequest
  /** The status, once an answer came (or 0 when the connection was closed without one). */
  answer: Promise<{ status: number; body: string; atMs: number; retryAfter?: string }>
}

/** Announces `length`, sends the head and `sendBytes` of the body from `localAddress`, then stalls. */
function hold(
  port: number,
  u: string,
  localAddress: string,
  sendBytes: number,
  path = rowsOf(u)
): Held {
  const started = performance.now()
  const req = request({
    host: '127.0.0.1',
    port,
    localAddress,
    method: 'POST',
    path,
    agent: false,
    headers: { 'content-type': 'application/json', 'content-length': BODY },
  })
  const answer = new Promise<Awaited<Held['answer']>>((resolve) => {
    req.on('response', (res) => {
      let body = ''
      res.on('data', (c) => (body += c))
      const retryAfter = res.headers['retry-after'] as string | undefined
      res.on('end', () =>
        resolve({ status: res.statusCode!, body, atMs: performance.now() - started, retryAfter })
      )
      res.on('error', () =>
        resolve({ status: res.statusCode!, body, atMs: performance.now() - started })
      )
    })
    req.on('error', () => resolve({ status: 0, body: '', atMs: performance.now() - started }))
  })
  req.flushHeaders()
  if (sendBytes > 0) req.write(appendBody(BODY).subarray(0, sendBytes))
  return { req, answer }
}

/** The open temporary files of basegate's held bodies (unlinked: the fd shows `(deleted)`). */
function heldFiles(pid: number): number {
  let count = 0
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).includes('basegate-body-')) count++
    } catch {
      // closed meanwhile
    }
  }
  return count
}

/** A sample of /metrics (`name` or `name{label="v"}`); a labelled one not yet counted is 0. */
async function metric(gw: GatewayProcess, name: string): Promise<number> {
  const text = await (await fetch(`${gw.adminUrl}/metrics`)).text()
  const line = text.split('\n').find((l) => l.startsWith(name + ' '))
  if (line !== undefined) return Number(line.slice(name.length + 1))
  return name.includes('{') ? 0 : NaN
}

describe('held bodies are bounded, and a head alone holds nothing (issues #31 item 1, #39 item 1)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  let tmp: string
  const sawBase = (u: string) => up.seen.some((s) => s.url.includes(u))
  beforeAll(async () => {
    up = await startStubUpstream()
    tmp = mkdtempSync(join(tmpdir(), 'bg-held-'))
    gw = await startGateway(testYaml(up.url, LIMITS), { env: { TMPDIR: tmp } })
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('bytes count as they arrive: 503 at the head past a client’s share, the kept part serves a newcomer, 503 at the byte past every bound, 408 and nothing left', async () => {
    const pid = gw.proc.pid!
    const before503 = await metric(gw, 'basegate_body_refusals_total{bound="client_share"}')
    // Client A holds two 250 kB bodies, all but a byte each: past the 100 kB of memory every
    // client shares, they wait on disk.
    const uA = [freshBase(), freshBase()]
    const a = uA.map((u) => hold(gw.port, u, '127.0.0.1', BODY - 1))
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) >= 2 * (BODY - 1))
    expect(heldFiles(pid)).toBe(2)
    expect(await metric(gw, 'basegate_body_buffered_bytes')).toBe(0)

    // A third body of A's would pass its share (500 kB held + 250 kB > 600 kB): 503 at its head.
    const uA3 = freshBase()
    const a3 = hold(gw.port, uA3, '127.0.0.1', 0)
    const r3 = await a3.answer
    expect(r3.status).toBe(503)
    expect(r3.retryAfter).toBe('1')
    expect(JSON.parse(r3.body).error_msg).toMatch(/this client's request bodies.*client_share/)
    a3.req.destroy()
    expect(await metric(gw, 'basegate_body_refusals_total{bound="client_share"}')).toBe(
      before503 + 1
    )

    // Client B is served meanwhile (800 kB of disk holds A's 500 kB and B's 250 kB).
    const uB = freshBase()
    const b = await hold(gw.port, uB, '127.0.0.5', BODY).answer
    expect(b.status).toBe(200)
    expect(sawBase(uB)).toBe(true)

    // B2 stalls 250 kB on disk too (750 kB of 800 kB). Client C holds nothing: past the shared
    // 100 kB of memory and with no room on disk, its body goes on in the part kept for it.
    const b2 = hold(gw.port, freshBase(), '127.0.0.2', BODY - 1)
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) >= 3 * (BODY - 1))
    const uC = freshBase()
    const c = hold(gw.port, uC, '127.0.0.3', BODY - 1)
    await until(async () => (await metric(gw, 'basegate_body_buffered_bytes')) >= BODY - 1)

    // Client D holds nothing either, but memory (400 kB with C's 250 kB) and disk are full: its
    // body gets 503 at the byte that passes them, not at its head.
    const uD = freshBase()
    const d = await hold(gw.port, uD, '127.0.0.6', BODY).answer
    expect(d.status).toBe(503)
    expect(JSON.parse(d.body).error_msg).toMatch(/buffer_bytes \+ spill_bytes/)

    // The stalled bodies get 408 at body_timeout_ms, their connections close, their bytes go.
    const answers = await Promise.all([...a, b2, c].map((h) => h.answer))
    for (const r of answers) {
      expect(r.status).toBe(408)
      expect(r.atMs).toBeGreaterThanOrEqual(1400)
      expect(r.atMs).toBeLessThan(6000)
      expect(JSON.parse(r.body).error_msg).toMatch(/body_timeout_ms \(1500 ms\)/)
    }
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) === 0)
    expect(await metric(gw, 'basegate_body_buffered_bytes')).toBe(0)
    await until(() => heldFiles(pid) === 0)
    expect(readdirSync(tmp)).toEqual([])
    for (const u of [...uA, uA3, uC, uD]) expect(sawBase(u)).toBe(false)

    // The 503s were not charged; the 408s were (the call was admitted, its client was slow).
    const usage = async (u: string) =>
      (await (await fetch(`${gw.adminUrl}/v1/usage/base/${u}`)).json()) as {
        windows: { used: number }[]
      }
    expect((await usage(uA3)).windows[0]!.used).toBe(0)
    expect((await usage(uD)).windows[0]!.used).toBe(0)
    expect((await usage(uA[0]!)).windows[0]!.used).toBe(1)
    const refusals = gw.logs.filter(
      (l) => l.outcome === 'body_unavailable' && [uA3, uD].some((u) => String(l.key).includes(u))
    )
    expect(refusals.map((l) => l.bound).sort()).toEqual(['client_share', 'spill_bytes'])
    expect(refusals.every((l) => l.status === 503 && l.level === 'warn')).toBe(true)
  })

  it('a chunked body is cut at the byte that passes the client’s share: 503, not forwarded', async () => {
    // Client .4 holds two bodies (500 kB of its 600 kB); a third, chunked, passes at 100 kB more.
    const stalls = [
      hold(gw.port, freshBase(), '127.0.0.4', BODY - 1),
      hold(gw.port, freshBase(), '127.0.0.4', BODY - 1),
    ]
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) >= 2 * (BODY - 1))
    const u = freshBase()
    const answer = await new Promise<{ status: number; body: string }>((resolve) => {
      const req = request({
        host: '127.0.0.1',
        port: gw.port,
        localAddress: '127.0.0.4',
        method: 'POST',
        path: rowsOf(u),
        agent: false,
        headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      })
      req.on('response', (res) => {
        let body = ''
        res.on('data', (c) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode!, body }))
      })
      req.on('error', () => resolve({ status: 0, body: '' }))
      req.write('{"rows":[')
      const row = Buffer.from(`{"N":"${'y'.repeat(10_000)}"},`)
      let sent = 0
      const pump = () => {
        // 200 kB at the most: past the share at 100 kB, before max_body_bytes' 300 kB.
        while (sent < 20) {
          sent++
          if (!req.write(row)) return void req.once('drain', pump)
        }
      }
      pump()
    })
    expect(answer.status).toBe(503)
    expect(JSON.parse(answer.body).error_msg).toMatch(/client_share/)
    expect(sawBase(u)).toBe(false)
    for (const r of await Promise.all(stalls.map((h) => h.answer))) expect(r.status).toBe(408)
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) === 0)
  })
})

describe('the change history reads its body through the size room (issue #32 item 5)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(testYaml(up.url, LIMITS))
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })
  const archive = (u: string) => `/api/v1/dtables/${u}/archive-view/`

  it('a Move Rows to Big Data body is held within the bounds (spilled past the shared memory) and forwarded as read; past them it is streamed on, never 503', async () => {
    // Held: past the 100 kB of memory every client shares it waits on disk, and shows there.
    const held = freshBase()
    const h = hold(gw.port, held, '127.0.0.6', BODY - 1, archive(held))
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) >= BODY - 1)
    expect(up.seen.some((s) => s.url.includes(held))).toBe(false)
    h.req.end(appendBody(BODY).subarray(BODY - 1))
    expect((await h.answer).status).toBe(200)
    expect(up.seen.find((s) => s.url.includes(held))!.bytes).toBe(BODY)

    // Issue #42 item 5: an unchecked endpoint's body is not a checked one. Past its client's
    // share (two 250 kB bodies of .5 held), the third is not refused: it streams through.
    const stalls = [freshBase(), freshBase()].map((u) => hold(gw.port, u, '127.0.0.5', BODY - 1))
    await until(async () => (await metric(gw, 'basegate_body_spilled_bytes')) >= 2 * (BODY - 1))
    const over = freshBase()
    const o = await hold(gw.port, over, '127.0.0.5', BODY, archive(over)).answer
    expect(o.status).toBe(200)
    expect(up.seen.find((s) => s.url.includes(over))!.bytes).toBe(BODY)
    for (const s of stalls) s.req.destroy()

    const arch = freshBase()
    const a = await send(gw.port, {
      method: 'POST',
      path: archive(arch),
      headers: { 'content-type': 'application/json' },
      body: '{"table_name":"T","view_name":"V"}',
    })
    expect(a.status).toBe(200)
    expect(up.seen.find((s) => s.url.includes(arch))!.bytes).toBe(34)
  })
})

/** One raw HTTP/1.1 exchange: the head, then what the gateway says before any body is sent. */
function rawExchange(
  port: number,
  head: string,
  then?: (sock: ReturnType<typeof connect>, seen: string) => void
): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1')
    let seen = ''
    let continued = false
    sock.on('data', (d) => {
      seen += d.toString('latin1')
      if (!continued && then !== undefined && seen.includes('\r\n\r\n')) {
        continued = true
        then(sock, seen)
      }
    })
    sock.on('close', () => resolve(seen))
    sock.on('error', () => resolve(seen))
    sock.write(head)
    setTimeout(() => sock.destroy(), 4000)
  })
}

describe('Expect: 100-continue only after every check the head allows (issue #31 item 4)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    gw = await startGateway(
      testYaml(up.url, 'size_limits: { max_body_bytes: 1000 }\nrate_limits: { base: 2/min }')
    )
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  const head = (path: string, length: number, extra = '') =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n${extra}\r\n`

  it('a length over max_body_bytes gets 413 and no 100, and the connection closes', async () => {
    const u = freshBase()
    const seen = await rawExchange(gw.port, head(rowsOf(u), 5000))
    expect(seen.startsWith('HTTP/1.1 413')).toBe(true)
    expect(seen).not.toContain('100 Continue')
    expect(seen.toLowerCase()).toContain('connection: close')
  })

  it('a charset the counters do not read gets 415 and no 100', async () => {
    const seen = await rawExchange(
      gw.port,
      head(rowsOf(freshBase()), 20).replace('application/json', 'application/json; charset=utf-7')
    )
    expect(seen.startsWith('HTTP/1.1 415')).toBe(true)
    expect(seen).not.toContain('100 Continue')
  })

  it('a rate refusal gets its 429 and no 100', async () => {
    const u = freshBase()
    const ok = '{"rows":[]}'
    for (let i = 0; i < 2; i++)
      expect(
        (
          await send(gw.port, {
            method: 'POST',
            path: rowsOf(u),
            body: ok,
            headers: { 'content-type': 'application/json' },
          })
        ).status
      ).toBe(200)
    const seen = await rawExchange(gw.port, head(rowsOf(u), ok.length))
    expect(seen.startsWith('HTTP/1.1 429')).toBe(true)
    expect(seen).not.toContain('100 Continue')
  })

  it('a call that passes gets 100 Continue, then its body is read, checked and forwarded', async () => {
    const u = freshBase()
    const body = '{"rows":[{"a":1}]}'
    const seen = await rawExchange(gw.port, head(rowsOf(u), body.length), (sock, first) => {
      expect(first.startsWith('HTTP/1.1 100 Continue\r\n\r\n')).toBe(true)
      sock.write(body)
      setTimeout(() => sock.end(), 500)
    })
    expect(seen).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)
    const fwd = up.seen.find((s) => s.url.includes(u))!
    expect(fwd.bytes).toBe(body.length)
    expect(fwd.headers.expect).toBeUndefined()
  })

  it('an unchecked call gets its 100 when it is forwarded', async () => {
    const body = '{"name":"x"}'
    const seen = await rawExchange(
      gw.port,
      head('/api/v2.1/workspace/1/dtable/', body.length),
      (sock) => {
        sock.write(body)
        setTimeout(() => sock.end(), 500)
      }
    )
    expect(seen).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)
  })
})
