import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { PIPELINED_MESSAGE } from '../../../src/process/connection-caps.js'
import { MAX_OVER, MAX_PIPELINED } from '../../../src/process/pipelined.js'
import { testYaml } from '../../helpers/gateway-process.js'
import { send } from '../../helpers/http.js'
import { useLive } from '../../helpers/live.js'
import { metricOf } from '../../helpers/metrics.js'
import { holds } from '../../helpers/until.js'

// SPEC §4 "Slow and idle clients never take what others need", for HTTP/1.1 pipelining: Node
// starts every request it parses, so on 0.7.7 one connection's pipelined requests were all calls
// at once (200 connections of 2,000 GETs: 2.6 GiB, another client's call waited 18 s). A
// connection's calls now go one at a time, in order; 16 may wait; the next is answered 503 in
// its turn and the connection closes.

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const path = (n: number) => `/api-gateway/api/v2/dtables/${U}/rows/?n=${n}`
const pipeline = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => `GET ${path(from + i)} HTTP/1.1\r\nHost: x\r\n\r\n`).join(
    ''
  )

/** Sends `text` on one connection from `localAddress` and reads until the server closes it or `answers` came. */
function exchange(port: number, text: string, answers: number, localAddress = '127.0.0.1') {
  return new Promise<{ text: string; closed: boolean }>((resolve) => {
    const s = connect({ host: '127.0.0.1', port, localAddress })
    let got = ''
    const done = (closed: boolean) => {
      s.destroy()
      resolve({ text: got, closed })
    }
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1')
      if ((got.match(/HTTP\/1\.1 /g) ?? []).length >= answers && /\}\s*$/.test(got)) {
        // Whole answers: wait a moment for a close that would follow them.
        setTimeout(() => done(s.destroyed || s.readableEnded), 50)
      }
    })
    s.on('end', () => done(true))
    s.on('error', () => done(true))
    s.write(text)
  })
}

describe('pipelined requests: one call at a time per connection (SPEC §4)', () => {
  let inFlight = 0
  let peak = 0
  let started = 0
  const live = useLive((up) => testYaml(up.url, 'rate_limits: { base: unlimited }'), {
    upstream: (up) =>
      up.handle((req: IncomingMessage, res: ServerResponse) => {
        const n = new URL(req.url!, 'http://x').searchParams.get('n')
        // The gateway's own calls (the server's version) are not the test's.
        if (n === null) return void res.end('{}')
        started++
        peak = Math.max(peak, ++inFlight)
        // Each answer takes a few milliseconds, so calls started together would overlap.
        setTimeout(() => {
          inFlight--
          const body = `{"n":${n}}`
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length })
          res.end(body)
        }, 3)
      }),
  })
  const reset = () => (started = peak = 0)

  it(`${MAX_PIPELINED + 1} pipelined GETs: every one answered, in order, one at a time at the server`, async () => {
    reset()
    const count = MAX_PIPELINED + 1
    const { text } = await exchange(live.gw.port, pipeline(0, count), count)
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1])).toEqual(
      Array(count).fill('200')
    )
    expect([...text.matchAll(/"n":(\d+)/g)].map((m) => Number(m[1]))).toEqual(
      Array.from({ length: count }, (_, i) => i)
    )
    expect(peak).toBe(1)
    expect(started).toBe(count)
  })

  it('one more: those in turn answered, the next 503 with connection: close, and nothing after it started', async () => {
    reset()
    const before = (await metricOf(live.gw.adminUrl, 'basegate_connections_refused_total')) || 0
    const count = MAX_PIPELINED + 1
    const { text, closed } = await exchange(live.gw.port, pipeline(0, count + 5), count + 1)
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1])
    expect(statuses).toEqual([...Array<string>(count).fill('200'), '503'])
    expect(text).toContain(PIPELINED_MESSAGE)
    expect(text.toLowerCase()).toContain('connection: close')
    expect(closed).toBe(true)
    expect(started).toBe(count)
    expect(peak).toBe(1)
    expect(await metricOf(live.gw.adminUrl, 'basegate_connections_refused_total')).toBe(before + 1)
  })

  it('20 connections of 2,000 pipelined GETs each: at most one call each at the server, 17 taken each, then closed; another client is answered', async () => {
    reset()
    const calls = async () => (await metricOf(live.gw.adminUrl, 'basegate_requests_total')) || 0
    const before = await calls()
    const closed: Promise<void>[] = []
    for (let c = 0; c < 20; c++) {
      const s = connect({ host: '127.0.0.1', port: live.gw.port, localAddress: '127.0.0.3' })
      s.on('error', () => {})
      s.resume()
      closed.push(new Promise((r) => s.once('close', () => r())))
      s.write(pipeline(c * 2000, 2000))
    }
    const other = await send(live.gw.port, { path: path(-1) })
    expect(other.status).toBe(200)
    // More than MAX_OVER past the line in Node's first read of each: each is closed at once.
    // (0.7.7 took every request as a call, and served them all: this wait failed.)
    expect(MAX_OVER + MAX_PIPELINED).toBeLessThan(500)
    await Promise.all(closed)
    await holds(() => inFlight === 0)
    expect(peak).toBeLessThanOrEqual(21)
    expect(started).toBeLessThanOrEqual(20 * (MAX_PIPELINED + 1) + 1)
    await holds(async () => (await calls()) - before >= started)
    expect((await calls()) - before).toBeLessThanOrEqual(20 * (MAX_PIPELINED + 1) + 1)
  }, 30_000)
})
