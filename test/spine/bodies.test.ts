import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { inProcess, type Pending } from '../helpers/in-process.js'

// SPEC §4 in process (issue #42): held bodies, their bounds, their 408s, on the fake clock. The
// same promises are tested against a running process in test/e2e/held-bodies.test.ts and
// slow-clients.test.ts; here every timer is the test's to move.

let n = 0
const freshBase = () =>
  `6f1c2a4e-0d3b-4c59-9a51-${(0x3e2d7c8b0000 + ++n).toString(16).padStart(12, '0')}`
const rowsOf = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`
const BODY = 25_000

/** A JSON append of exactly `size` bytes (one row with a long string). */
function appendBody(size: number): Buffer {
  const head = '{"table_name":"T","rows":[{"N":"'
  const tail = '"}]}'
  return Buffer.from(head + 'x'.repeat(size - head.length - tail.length) + tail)
}

const tmps: string[] = []
afterEach(() => {
  for (const t of tmps.splice(0)) rmSync(t, { recursive: true, force: true })
})

/** 40 kB of memory (the last 30 kB kept for clients holding nothing), 80 kB on disk, a client half. */
function held(bodyTimeoutMs = 1500, minBodyRate = 0) {
  const tmp = mkdtempSync(join(tmpdir(), 'bg-inproc-'))
  tmps.push(tmp)
  const g = inProcess(
    `size_limits: { buffer_bytes: 40000, spill_bytes: 80000, client_share: 1/2, body_timeout_ms: ${bodyTimeoutMs}, max_body_bytes: 30000, min_body_rate: ${minBodyRate} }\nrate_limits: { base: 1000/min }`,
    { deps: { tmpDir: tmp } }
  )
  /** Announces BODY bytes and sends `bytes` of them. */
  const open = (u: string, remote: string, bytes: number): Pending => {
    const p = g.start('POST', rowsOf(u), {
      open: true,
      remote,
      headers: { 'content-type': 'application/json', 'content-length': String(BODY) },
    })
    if (bytes > 0) p.push(appendBody(BODY).subarray(0, bytes))
    return p
  }
  const gauge = async (name: string) => {
    const text = await g.metrics.registry.metrics()
    const line = text.split('\n').find((l) => l.startsWith(name + ' '))
    return Number(line?.slice(name.length + 1) ?? NaN)
  }
  return { g, tmp, open, gauge }
}

const forwardedTo = (g: ReturnType<typeof held>['g'], u: string) =>
  g.forwarded.filter((f) => f.pathAndQuery.includes(u)).length

describe('SPEC §4 held bodies, in process', () => {
  it('heads alone hold nothing; a third client is served; the heads end with 408 at body_timeout_ms', async () => {
    const { g, open, gauge } = held()
    const heads = Array.from({ length: 20 }, (_, i) =>
      open(freshBase(), i % 2 ? '10.0.0.2' : '10.0.0.3', 0)
    )
    await g.tick()
    expect(await gauge('basegate_body_buffered_bytes')).toBe(0)
    const u = freshBase()
    const victim = await g.call('POST', rowsOf(u), {
      remote: '10.0.0.4',
      headers: { 'content-type': 'application/json' },
      body: appendBody(BODY),
    })
    expect(victim.status).toBe(200)
    expect(forwardedTo(g, u)).toBe(1)
    g.clock.advance(1500)
    const ends = await Promise.all(heads.map((h) => h.answer))
    for (const e of ends) {
      expect(e.status).toBe(408)
      expect(JSON.parse(e.body).error_msg).toMatch(/body_timeout_ms \(1500 ms\)/)
    }
    expect(g.forwarded).toHaveLength(1)
    const lines = g.requestLines().filter((l) => l.status === 408)
    expect(lines).toHaveLength(20)
    expect(lines.every((l) => l.outcome === 'body_timeout' && l.bound === 'body_timeout')).toBe(
      true
    )
  })

  it("bytes count as they arrive: 503 at the head past a client's share, another client served, all freed after", async () => {
    const { g, tmp, open, gauge } = held()
    // A holds two bodies of all but a byte: 50 kB, past the 10 kB every client shares in memory.
    const a = [open(freshBase(), '10.0.0.1', BODY - 1), open(freshBase(), '10.0.0.1', BODY - 1)]
    for (let i = 0; i < 20 && (await gauge('basegate_body_spilled_bytes')) < 2 * (BODY - 1); i++)
      await new Promise((r) => setTimeout(r, 10))
    expect(await gauge('basegate_body_spilled_bytes')).toBe(2 * (BODY - 1))
    // A third body of A's would pass its share (60 kB): 503 at its head, nothing charged.
    const u3 = freshBase()
    const a3 = await open(u3, '10.0.0.1', 0).answer
    expect(a3.status).toBe(503)
    expect(a3.headers!['retry-after']).toBe('1')
    expect(JSON.parse(a3.body).error_msg).toMatch(/this client's request bodies.*client_share/)
    expect(g.requestLines().at(-1)).toMatchObject({
      outcome: 'body_unavailable',
      bound: 'client_share',
      status: 503,
    })
    // B is served meanwhile.
    const uB = freshBase()
    const b = await g.call('POST', rowsOf(uB), {
      remote: '10.0.0.5',
      headers: { 'content-type': 'application/json' },
      body: appendBody(BODY),
    })
    expect(b.status).toBe(200)
    expect(forwardedTo(g, uB)).toBe(1)
    // A's stalled bodies end at body_timeout_ms; their bytes and files go.
    g.clock.advance(1500)
    for (const r of await Promise.all(a.map((h) => h.answer))) expect(r.status).toBe(408)
    for (let i = 0; i < 50 && readdirSync(tmp).length > 0; i++)
      await new Promise((r) => setTimeout(r, 10))
    expect(readdirSync(tmp)).toEqual([])
    expect(await gauge('basegate_body_spilled_bytes')).toBe(0)
    expect(await gauge('basegate_body_buffered_bytes')).toBe(0)
    expect(forwardedTo(g, u3)).toBe(0)
  })

  it('min_body_rate: a body sent below the rate gets 408 naming it; one sent above it is forwarded', async () => {
    const { g, open } = held(600_000, 1000)
    const slowBase = freshBase()
    const slow = open(slowBase, '10.0.0.1', 0)
    const body = appendBody(BODY)
    // 500 bytes a second: half the rate. Judged from the 10th second on (the first 5 s are not).
    let sent = 0
    let answered = false
    void slow.answer.then(() => (answered = true))
    for (let s = 0; s < 20 && !answered; s++) {
      slow.push(body.subarray(sent, sent + 500))
      sent += 500
      await g.tick()
      g.clock.advance(1000)
      await g.tick()
    }
    const a = await slow.answer
    expect(a.status).toBe(408)
    expect(JSON.parse(a.body).error_msg).toMatch(/min_body_rate \(1000 bytes\/s/)
    expect(sent).toBeGreaterThanOrEqual(10 * 500)
    expect(sent).toBeLessThanOrEqual(12 * 500)
    expect(g.requestLines().at(-1)).toMatchObject({
      outcome: 'body_timeout',
      bound: 'min_body_rate',
    })
    expect(forwardedTo(g, slowBase)).toBe(0)

    // 5,000 bytes a second: the whole body in 5 s, forwarded.
    const fastBase = freshBase()
    const fast = open(fastBase, '10.0.0.2', 0)
    for (let at = 0; at < BODY; at += 5000) {
      fast.push(body.subarray(at, at + 5000))
      await g.tick()
      g.clock.advance(1000)
    }
    fast.end()
    expect((await fast.answer).status).toBe(200)
    expect(forwardedTo(g, fastBase)).toBe(1)
  })

  it('a checked call with two Content-Type headers is refused 400 before its body is read, and not forwarded', async () => {
    const { g } = held()
    const u = freshBase()
    const a = await g.call('POST', rowsOf(u), {
      headers: { 'content-type': 'application/json' },
      extraRaw: ['Content-Type', 'text/plain'],
      body: appendBody(200),
    })
    expect(a.status).toBe(400)
    expect(JSON.parse(a.body).error_msg).toMatch(/more than one Content-Type header/)
    expect(forwardedTo(g, u)).toBe(0)
    expect(g.requestLines().at(-1)).toMatchObject({ status: 400, outcome: 'size_refused' })
  })
})
