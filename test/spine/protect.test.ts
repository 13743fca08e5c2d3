import { describe, expect, it } from 'vitest'
import { inProcess } from '../helpers/in-process.js'

// SPEC §9 in process (issue #42): the in-flight ceiling and its queue, delay_ms, key_in_flight,
// and one release at every exit (a step that throws included), on the fake clock with a stub
// server that holds calls until the test answers them. Through the real listeners and forwarder:
// test/process/live/protect.test.ts.

const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const B = '11111111-0d3b-4c59-9a51-3e2d7c8b9a10'
const rowsOf = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`

describe('SPEC §9 in process', () => {
  it('past max_in_flight a call waits queue_ms, then 503 with retry-after, given back (the next call is not refused for it)', async () => {
    const g = inProcess(
      'rate_limits: { base: 2/min }\nprotect: { max_in_flight: 1, queue_ms: 500 }',
      {
        upstream: () => 'hold',
      }
    )
    const first = g.start('GET', rowsOf(A))
    await g.tick()
    expect(g.held).toHaveLength(1)
    const second = g.start('GET', rowsOf(A))
    await g.tick()
    expect(g.gw.protector.state().waiting.base).toBe(1)
    g.clock.advance(499)
    await g.tick()
    expect(g.forwarded).toHaveLength(1)
    g.clock.advance(1)
    const shed = await second.answer
    expect(shed.status).toBe(503)
    expect(shed.headers!['retry-after']).toBe('1')
    expect(JSON.parse(shed.body).error_msg).toBe('the server is busy; try again shortly')
    expect(g.requestLines().at(-1)).toMatchObject({ outcome: 'shed', waited_ms: 500 })
    g.held[0]!.answer()
    expect((await first.answer).status).toBe(200)
    // 2/min: had the shed call been charged, this third call would be refused.
    const third = g.start('GET', rowsOf(A))
    await g.tick()
    g.held[1]!.answer()
    expect((await third.answer).status).toBe(200)
    expect(g.gw.protector.state().in_flight.base).toBe(0)
  })

  it('a freed slot goes to the web UI before the API calls that waited longer', async () => {
    const g = inProcess('protect: { max_in_flight: 1, queue_ms: 10000 }', {
      upstream: () => 'hold',
    })
    const first = g.start('GET', rowsOf(A))
    await g.tick()
    const api = g.start('GET', rowsOf(B))
    await g.tick()
    const page = g.start('GET', '/dtable/workspace/1/')
    await g.tick()
    g.held[0]!.answer()
    await first.answer
    await g.tick()
    expect(g.forwarded.map((f) => f.pathAndQuery)).toEqual([rowsOf(A), '/dtable/workspace/1/'])
    g.held[1]!.answer()
    await page.answer
    await g.tick()
    expect(g.forwarded[2]!.pathAndQuery).toBe(rowsOf(B))
    g.held[2]!.answer()
    expect((await api.answer).status).toBe(200)
  })

  it('an exempt call never waits, even with every slot taken', async () => {
    const g = inProcess('protect: { max_in_flight: 1, queue_ms: 5000 }', {
      upstream: (f) => (f.pathAndQuery.startsWith('/api2/ping') ? { status: 200 } : 'hold'),
    })
    const first = g.start('GET', rowsOf(A))
    await g.tick()
    expect(g.held).toHaveLength(1)
    // Answered while the one slot is still held, with no time passing (a wait would shed it).
    const ping = await g.call('GET', '/api2/ping/')
    expect(ping.status).toBe(200)
    expect(g.gw.protector.state().waiting).toMatchObject({ base: 0, other: 0 })
    g.held[0]!.answer()
    expect((await first.answer).status).toBe(200)
  })

  it('key_in_flight: a second call of a busy key gets 429 with retry-after 1, given back; another key goes on', async () => {
    const g = inProcess('rate_limits: { base: 2/min }\nprotect: { key_in_flight: 1 }', {
      upstream: () => 'hold',
    })
    const first = g.start('GET', rowsOf(A))
    await g.tick()
    const busy = await g.call('GET', rowsOf(A))
    expect(busy.status).toBe(429)
    expect(busy.headers!['retry-after']).toBe('1')
    expect(JSON.parse(busy.body).error_msg).toBe('too many calls of this key are in progress')
    expect(g.requestLines().at(-1)).toMatchObject({ outcome: 'key_in_flight', status: 429 })
    const other = g.start('GET', rowsOf(B))
    await g.tick()
    expect(g.held).toHaveLength(2)
    g.held[0]!.answer()
    g.held[1]!.answer()
    await Promise.all([first.answer, other.answer])
    // The refused call was given back: this is A's second charged call of 2/min.
    const again = g.start('GET', rowsOf(A))
    await g.tick()
    g.held[2]!.answer()
    expect((await again.answer).status).toBe(200)
  })

  it('key_in_flight: a call refused for its size frees its key’s place (02d4d23)', async () => {
    const g = inProcess('protect: { key_in_flight: 1 }\nsize_limits: { list_rows: 100 }')
    for (let i = 0; i < 3; i++) {
      const r = await g.call('GET', `${rowsOf(A)}?table_name=T&limit=500`)
      expect(r.status).toBe(400)
    }
    expect((await g.call('GET', `${rowsOf(A)}?table_name=T&limit=50`)).status).toBe(200)
  })

  it('delay_ms: a refusal whose window admits again within it waits on the clock and is admitted; a longer wait is refused at once', async () => {
    const g = inProcess('rate_limits: { base: 1/s, delay_ms: 2000 }')
    expect((await g.call('GET', rowsOf(A))).status).toBe(200)
    const waiting = g.start('GET', rowsOf(A))
    let answered = false
    void waiting.answer.then(() => (answered = true))
    await g.tick()
    expect(answered).toBe(false)
    expect(g.clock.timers).toBeGreaterThan(0)
    g.clock.advance(1100)
    const a = await waiting.answer
    expect(a.status).toBe(200)
    const line = g.requestLines().at(-1)!
    expect(line.outcome).toBe('forwarded')
    expect(line.delayed_ms).toBeGreaterThan(900)
    expect(line.delayed_ms).toBeLessThanOrEqual(1100)
    expect(g.gw.protector.state().delayed).toEqual({ admitted: 1, refused: 0 })

    const slow = inProcess('rate_limits: { base: 1/min, delay_ms: 2000 }')
    expect((await slow.call('GET', rowsOf(A))).status).toBe(200)
    const refused = await slow.call('GET', rowsOf(A))
    expect(refused.status).toBe(429)
    expect(refused.sync).toBe(true)
  })

  it('delay_ms: a 101st waiter of one key is refused at once; after the wait two of the hundred fit, the rest get 429', async () => {
    const g = inProcess('rate_limits: { base: 2/s, delay_ms: 1500 }')
    expect((await g.call('GET', rowsOf(A))).status).toBe(200)
    expect((await g.call('GET', rowsOf(A))).status).toBe(200)
    const waiters = Array.from({ length: 100 }, () => g.start('GET', rowsOf(A)))
    await g.tick()
    const extra = await g.call('GET', rowsOf(A))
    expect(extra.status).toBe(429)
    expect(g.forwarded).toHaveLength(2)
    g.clock.advance(1100)
    const rest = await Promise.all(waiters.map((w) => w.answer))
    expect(rest.filter((a) => a.status === 200)).toHaveLength(2)
    expect(rest.filter((a) => a.status === 429)).toHaveLength(98)
  })

  it('a client that leaves while its call waits out a delay frees its place and is not forwarded', async () => {
    const g = inProcess('rate_limits: { base: 1/s, delay_ms: 2000 }')
    await g.call('GET', rowsOf(A))
    const waiting = g.start('GET', rowsOf(A))
    await g.tick()
    waiting.leave()
    await waiting.answer
    g.clock.advance(2000)
    await g.tick()
    expect(g.forwarded).toHaveLength(1)
    expect(g.requestLines().at(-1)).toMatchObject({ outcome: 'client_aborted' })
    expect(g.gw.protector.state().delayed).toEqual({ admitted: 0, refused: 0 })
  })

  it('delay_ms: a monthly 429 never waits (the month does not free up within a delay)', async () => {
    const g = inProcess(
      `rate_limits: { base: 2/s, delay_ms: 1500 }\nmonthly: { enabled: true, plans: { tiny: { calls: 2 } }, teams: [ { id: small, plan: tiny, bases: ["${A}"] } ] }`
    )
    expect((await g.call('GET', rowsOf(A))).status).toBe(200)
    expect((await g.call('GET', rowsOf(A))).status).toBe(200)
    g.clock.advance(1100)
    const month = await g.call('GET', rowsOf(A))
    expect(month.status).toBe(429)
    expect(month.sync).toBe(true)
    const line = g.requestLines().at(-1)!
    expect(line.outcome).toBe('monthly_limited')
    expect(line.delayed_ms).toBeUndefined()
  })

  it('a client that leaves while it waits for a slot frees its place at once and is given back', async () => {
    const g = inProcess(
      'rate_limits: { base: 3/min }\nprotect: { max_in_flight: 1, queue_ms: 5000 }',
      {
        upstream: () => 'hold',
      }
    )
    const first = g.start('GET', rowsOf(A))
    await g.tick()
    const leaving = g.start('GET', rowsOf(A))
    await g.tick()
    expect(g.gw.protector.state().waiting.base).toBe(1)
    leaving.leave()
    await leaving.answer
    expect(g.gw.protector.state().waiting.base).toBe(0)
    expect(g.requestLines().at(-1)).toMatchObject({ outcome: 'client_aborted', given_back: true })
    g.held[0]!.answer()
    await first.answer
    // 3/min: the first and these two fit only because the one that left was given back.
    for (let i = 0; i < 2; i++) {
      const next = g.start('GET', rowsOf(A))
      await g.tick()
      g.held.at(-1)!.answer()
      expect((await next.answer).status).toBe(200)
    }
  })

  it.each([
    [false, 'given back: a fourth call fits 3/min', [500, 500, 500, 200]],
    [null, 'charged (the default): a fourth call is refused', [500, 500, 500, 429]],
  ] as const)(
    'charge.server_errors %s: three 500s are %s',
    async (serverErrors, _said, statuses) => {
      let status = 500
      const charge = serverErrors === null ? '' : `charge: { server_errors: ${serverErrors} }`
      const g = inProcess(`${charge}\nrate_limits: { base: 3/min }`, {
        upstream: () => ({ status }),
      })
      const seen: (number | undefined)[] = []
      for (let i = 0; i < 3; i++) seen.push((await g.call('GET', rowsOf(A))).status)
      status = 200
      seen.push((await g.call('GET', rowsOf(A))).status)
      expect(seen).toEqual(statuses)
      const failed = g.requestLines().filter((l) => l.status === 500)
      expect(failed).toHaveLength(3)
      expect(failed.every((l) => (l.given_back === true) === (serverErrors === false))).toBe(true)
    }
  )

  it('a step that throws: 500, one line, and the key place and slot it held are freed', async () => {
    let throwOnce = true
    const g = inProcess('protect: { max_in_flight: 1, key_in_flight: 1, queue_ms: 100 }', {
      upstream: () => {
        if (throwOnce) {
          throwOnce = false
          throw new Error('a bug in a step')
        }
        return { status: 200 }
      },
    })
    const broken = await g.call('GET', rowsOf(A))
    expect(broken.status).toBe(500)
    expect(JSON.parse(broken.body).error_msg).toBe('internal error')
    const lines = g.requestLines()
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ status: 500, outcome: 'internal_error' })
    expect(g.lines.some((l) => l.msg === 'request failed' && l.level === 'error')).toBe(true)
    const state = g.gw.protector.state()
    expect(state.in_flight.base).toBe(0)
    // Had the key's place or the slot leaked, this call would get 429 or wait and be shed.
    expect((await g.call('GET', rowsOf(A))).status).toBe(200)
  })
})
