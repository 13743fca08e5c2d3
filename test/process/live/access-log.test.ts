import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { useLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'

// Issue #25 / SPEC §7: the access-log fields operators know from nginx and Envoy, on every line:
// client_ip, user_agent (≤ 200), request_id (the client's when sane, sent upstream and
// answered), bytes_in, bytes_out; store_ms is the store call's duration, store_time its clock.

const U = '8a1b2c3d-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = `/api-gateway/api/v2/dtables/${U}/rows/`

const live = useLive((up) => testYaml(up.url, 'rate_limits: { base: 2/min }'))

const lineOf = (id: string) => live.gw.waitForLog((l) => l.request_id === id)

describe('access-log fields', () => {
  it("a sane x-request-id is kept: logged, sent upstream, answered; with the client's IP, agent, bytes", async () => {
    const body = '{"table_name":"T","rows":[{"a":1}]}'
    const a = await send(live.gw.port, {
      method: 'POST',
      path: rows,
      headers: {
        'x-request-id': 'abc-123_x.y',
        'user-agent': 'ua/1',
        'content-type': 'application/json',
      },
      body,
    })
    expect(a.status).toBe(200)
    expect(a.headers['x-request-id']).toBe('abc-123_x.y')
    expect(live.up.seen.at(-1)!.headers['x-request-id']).toBe('abc-123_x.y')
    const line = await lineOf('abc-123_x.y')
    expect(line).toMatchObject({
      client_ip: '127.0.0.1',
      user_agent: 'ua/1',
      bytes_in: body.length,
      bytes_out: Buffer.byteLength(a.body),
    })
    expect(line.store_ms).toEqual(expect.any(Number))
    expect(line.store_ms as number).toBeLessThan(1000) // a duration, not a clock
  })

  it('a malformed x-request-id is replaced, never logged raw; a long agent is cut to 200', async () => {
    const evil = 'x" injected\\n{"level":"fatal"}'
    const a = await send(live.gw.port, {
      path: rows,
      headers: { 'x-request-id': evil, 'user-agent': 'u'.repeat(500) },
    })
    const id = String(a.headers['x-request-id'])
    expect(id).toMatch(/^[0-9a-f]{12}-[0-9a-z]+$/)
    expect(live.up.seen.at(-1)!.headers['x-request-id']).toBe(id)
    const line = await lineOf(id)
    expect((line.user_agent as string).length).toBe(200)
    expect(JSON.stringify(live.gw.logs)).not.toContain('injected')
  })

  it('refusals carry them too: a 429 answers its id and logs bytes_out 0', async () => {
    let last = await send(live.gw.port, { path: rows, headers: { 'x-request-id': 'r-1' } })
    for (let i = 2; last.status !== 429 && i < 6; i++)
      last = await send(live.gw.port, { path: rows, headers: { 'x-request-id': `r-${i}` } })
    expect(last.status).toBe(429)
    const id = String(last.headers['x-request-id'])
    const line = await lineOf(id)
    expect(line).toMatchObject({ status: 429, client_ip: '127.0.0.1', bytes_out: 0 })
  })
})
