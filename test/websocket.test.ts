import { describe, expect, it } from 'vitest'
import { inProcess, type InProcess } from './helpers/in-process.js'

// SPEC §4, §6, §9 in process (issue #48): an Upgrade runs the plain request's steps (gate, key
// share, slot) and its answers of ours go to the raw socket. On the fake clock with a stub
// server that holds plain calls; no upgrade here reaches a server (those that pass the steps
// meet port 1 and are answered 502). The tunnel itself, through the real listeners:
// test/process/live/websocket.test.ts.

const SOCKET = '/socket.io/?EIO=4&transport=websocket'
const PAGE = '/dtable/workspace/1/'

/** An answer of ours on the raw socket: its status, retry-after 1, closed, its message and line. */
function saidOnSocket(
  g: InProcess,
  a: Awaited<ReturnType<InProcess['upgrade']>>,
  want: { status: number; message: string; line: Record<string, unknown> }
): void {
  expect(a.status).toBe(want.status)
  expect(a.headers).toMatchObject({ 'retry-after': '1', connection: 'close' })
  expect(JSON.parse(a.body).error_msg).toBe(want.message)
  expect(g.requestLines().at(-1)).toMatchObject({ ...want.line, status: want.status })
}

describe('a WebSocket upgrade in process', () => {
  it('a busy key (key_in_flight): 429 with retry-after on the raw socket, connection closed, one line; the key goes on once free', async () => {
    const g = inProcess('protect: { key_in_flight: 1 }', { upstream: () => 'hold' })
    const page = g.start('GET', PAGE)
    await g.tick()
    saidOnSocket(g, await g.upgrade(SOCKET), {
      status: 429,
      message: 'too many calls of this key are in progress',
      line: { outcome: 'key_in_flight' },
    })
    g.held[0]!.answer()
    await page.answer
    // The key's place is free: the upgrade passes every step and meets the server (port 1).
    const through = await g.upgrade(SOCKET)
    expect(through.status).toBe(502)
    expect(g.requestLines().at(-1)).toMatchObject({ outcome: 'upstream_error', status: 502 })
  })

  it('past max_in_flight an upgrade waits queue_ms, then 503 on the raw socket; its tunnel place and slot are given back', async () => {
    const g = inProcess(
      'protect: { max_in_flight: 1, queue_ms: 500 }\nupstream: { max_tunnels: 1 }',
      {
        upstream: () => 'hold',
      }
    )
    const plain = g.start(
      'GET',
      `/api-gateway/api/v2/dtables/6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10/rows/`
    )
    await g.tick()
    const waiting = g.upgrade(SOCKET)
    await g.tick()
    expect(g.gw.protector.state().waiting.other).toBe(1)
    g.clock.advance(499)
    await g.tick()
    g.clock.advance(1)
    saidOnSocket(g, await waiting, {
      status: 503,
      message: 'the server is busy; try again shortly',
      line: { outcome: 'shed', waited_ms: 500 },
    })
    g.held[0]!.answer()
    await plain.answer
    // max_tunnels 1: had the shed upgrade kept its place, this one would get the tunnels' 503.
    const next = await g.upgrade(SOCKET)
    expect(next.status).toBe(502)
    expect(g.gw.protector.state().in_flight).toMatchObject({ other: 0, base: 0 })
  })

  it('a step that throws: 500 on the raw socket, one line, and the key place, slot and tunnel place are freed', async () => {
    const g = inProcess(
      'protect: { max_in_flight: 1, key_in_flight: 1, queue_ms: 100 }\nupstream: { max_tunnels: 1 }'
    )
    // A header the server request refuses to carry (a bug in a step, as far as the story knows).
    const broken = await g.upgrade(SOCKET, { headers: { 'x-bad': 'a\nb' } })
    expect(broken.status).toBe(500)
    expect(JSON.parse(broken.body).error_msg).toBe('internal error')
    expect(g.requestLines()).toHaveLength(1)
    expect(g.requestLines()[0]).toMatchObject({ status: 500, outcome: 'internal_error' })
    expect(g.lines.some((l) => l.msg === 'request failed' && l.level === 'error')).toBe(true)
    // Had any place leaked, this upgrade would get 429, wait and be shed, or the tunnels' 503.
    expect((await g.upgrade(SOCKET)).status).toBe(502)
    expect(g.gw.protector.state().in_flight.other).toBe(0)
  })

  it('an Upgrade that is not a WebSocket on the socket path, or a WebSocket elsewhere: 400, nothing forwarded', async () => {
    const g = inProcess('')
    const h2c = await g.upgrade(SOCKET, { headers: { upgrade: 'h2c' } })
    expect(h2c.status).toBe(400)
    expect(JSON.parse(h2c.body).error_msg).toBe(
      'Upgrade "h2c" is not accepted (only websocket, on /socket.io/)'
    )
    const elsewhere = await g.upgrade(PAGE)
    expect(elsewhere.status).toBe(400)
    expect(JSON.parse(elsewhere.body).error_msg).toMatch(/only on the service socket paths/)
    expect(g.requestLines().map((l) => l.outcome)).toEqual(['bad_request', 'bad_request'])
  })

  it('a rate-limited upgrade: a bare 429 with retry-after on the raw socket, the connection closed', async () => {
    const g = inProcess('rate_limits: { other: 1/min }')
    expect((await g.upgrade(SOCKET)).status).toBe(502)
    const refused = await g.upgrade(SOCKET)
    expect(refused.status).toBe(429)
    expect(refused.body).toBe('')
    expect(refused.headers).toMatchObject({ 'content-length': '0', connection: 'close' })
    expect(Number(refused.headers!['retry-after'])).toBeGreaterThan(0)
    expect(g.requestLines().at(-1)).toMatchObject({ status: 429, outcome: 'rate_limited' })
  })
})
