// SPEC §4 size limits where a client meets them, served in the test's process (issue #48); the
// reload by SIGHUP stays in test/e2e/size-limits.test.ts.

import { createHash } from 'node:crypto'
import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testYaml, type Gateway } from '../../helpers/gateway-process.js'
import { startLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { recordBodies, startStubUpstream, type StubUpstream } from '../../helpers/stub-upstream.js'

const uuid = (n: number) => `${n.toString(16).padStart(8, '0')}-1111-4c59-9a51-3e2d7c8b9a10`
const rows = (n: number) => `/api-gateway/api/v2/dtables/${uuid(n)}/rows/`
const sqlPath = (n: number) => `/api-gateway/api/v2/dtables/${uuid(n)}/sql`
const json = { 'content-type': 'application/json' }
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex')

let up: StubUpstream
let gw: Gateway
// The upstream records the exact bytes it received (of the calls, not of a gateway's own
// GET /server-info/, which a gateway started in a test may send after the call it forwards).
const received: Buffer[] = []

beforeAll(async () => {
  up = await startStubUpstream()
  up.handle(
    recordBodies((url, body) => {
      if (!url.startsWith('/server-info')) received.push(body)
    })
  )
  gw = await startLive(
    testYaml(
      up.url,
      `rate_limits: { base: 50/min }\nsize_limits: { append_rows: 1000, delete_rows: 10000, list_rows: 1000, sql_list: 10000, max_body_bytes: 200000 }`
    )
  )
})
afterAll(async () => {
  await gw?.stop()
  await up?.close()
})

function bodyWithRows(n: number, field = 'rows'): string {
  // Odd spacing and escapes: any re-serialisation on the way would change the bytes.
  const items = Array.from({ length: n }, (_, i) =>
    field === 'row_ids' ? `"r${i}"` : `{ "Name" : "\\u00e9${i}" }`
  )
  return `{"table_name":  "Table1",\n "${field}": [${items.join(' ,')}] , "apply_default" : false }`
}

describe('rows endpoints', () => {
  it('forwards a body within the limit byte for byte', async () => {
    const body = bodyWithRows(1000)
    const a = await send(gw.port, { method: 'POST', path: rows(1), headers: json, body })
    expect(a.status).toBe(200)
    expect(sha(received.at(-1)!)).toBe(sha(body))
  })

  it('refuses 1001 rows with 400 naming the limit and the count, and the call used a rate slot', async () => {
    const append = (n: number) =>
      send(gw.port, { method: 'POST', path: rows(2), headers: json, body: bodyWithRows(n) })
    const first = await append(1)
    expect(first.headers['x-ratelimit-remaining']).toBe('49')
    const before = received.length
    const a = await append(1001)
    expect(a.status).toBe(400)
    expect(a.headers['content-type']).toContain('application/json')
    const msg = JSON.parse(a.body).error_msg as string
    expect(msg).toContain('append_rows')
    expect(msg).toContain('1000')
    expect(msg).toContain('1001')
    expect(a.headers['x-ratelimit-remaining']).toBe('48')
    expect(received.length).toBe(before)
    const next = await append(1)
    expect(next.headers['x-ratelimit-remaining']).toBe('47')
  })

  it('counts row_ids on DELETE against delete_rows', async () => {
    expect(
      (
        await send(gw.port, {
          method: 'DELETE',
          path: rows(3),
          headers: json,
          body: bodyWithRows(10000, 'row_ids'),
        })
      ).status
    ).toBe(200)
    const a = await send(gw.port, {
      method: 'DELETE',
      path: rows(3),
      headers: json,
      body: bodyWithRows(10001, 'row_ids'),
    })
    expect(a.status).toBe(400)
    expect(JSON.parse(a.body).error_msg).toContain('delete_rows')
  })

  it('counts the limit parameter of a list', async () => {
    expect((await send(gw.port, { path: rows(4) + '?table_name=T&limit=1000' })).status).toBe(200)
    const a = await send(gw.port, { path: rows(4) + '?table_name=T&limit=1001' })
    expect(a.status).toBe(400)
    expect(JSON.parse(a.body).error_msg).toContain('list_rows')
  })

  it('answers 400 for a body that is not the JSON expected', async () => {
    for (const body of ['{"table_name": "T", "rows": ', '{"table_name": "T"}', '[1,2]']) {
      const a = await send(gw.port, { method: 'POST', path: rows(5), headers: json, body })
      expect(a.status).toBe(400)
      expect(JSON.parse(a.body).error_msg).toEqual(expect.any(String))
    }
  })

  it('answers 413 to a declared length over max_body_bytes without reading it', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          port: gw.port,
          host: '127.0.0.1',
          method: 'POST',
          path: rows(6),
          agent: false,
          headers: { ...json, 'content-length': '5000000' },
        },
        (res) => {
          res.resume()
          resolve(res.statusCode!)
        }
      )
      req.on('error', reject)
      req.write('{"rows": [') // the rest never comes: a gateway that waited for it would hang
    })
    expect(status).toBe(413)
  })

  it('answers 413 to a chunked body that grows past max_body_bytes', async () => {
    const big = Buffer.alloc(300_000, 0x20)
    const status = await new Promise<number>((resolve) => {
      const req = request(
        {
          port: gw.port,
          host: '127.0.0.1',
          method: 'PUT',
          path: rows(7),
          agent: false,
          headers: { ...json, 'transfer-encoding': 'chunked' },
        },
        (res) => {
          res.resume()
          resolve(res.statusCode!)
        }
      )
      req.on('error', () => {})
      req.write('{"updates": [')
      req.write(big)
    })
    expect(status).toBe(413)
  })

  it('streams other endpoints without buffering, whatever their size', async () => {
    const big = 'x'.repeat(500_000) // over max_body_bytes, but not a checked endpoint
    const a = await send(gw.port, {
      method: 'POST',
      path: `/api-gateway/api/v2/dtables/${uuid(8)}/batch-update-rows/`,
      headers: json,
      body: big,
    })
    expect(a.status).toBe(200)
    expect(received.at(-1)!.length).toBe(500_000)
  })
})

describe('SQL endpoint', () => {
  const sql = (text: string, extra = {}) =>
    JSON.stringify({ sql: text, convert_keys: true, ...extra })

  it('refuses a SELECT whose LIMIT is over sql_list; forwards the rest unchanged', async () => {
    const over = await send(gw.port, {
      method: 'POST',
      path: sqlPath(1),
      headers: json,
      body: sql('SELECT * FROM Table1 LIMIT 10001'),
    })
    expect(over.status).toBe(400)
    expect(JSON.parse(over.body).error_msg).toMatch(/sql_list.*10000.*10001/)
    for (const text of [
      'SELECT * FROM Table1 LIMIT 10000',
      "SELECT * FROM Table1 WHERE Name = 'LIMIT 99999'",
      'SELECT * FROM Table1 /* LIMIT 99999 */',
      'SELECT * FROM Table1',
      "INSERT INTO Table1 (Name) VALUES ('a')",
      'THIS IS NOT SQL LIMIT 99999',
    ]) {
      const body = sql(text)
      const a = await send(gw.port, { method: 'POST', path: sqlPath(1) + '/', headers: json, body })
      expect(a.status, text).toBe(200)
      expect(received.at(-1)!.toString()).toBe(body)
    }
    // Issue #15: the service's own SQL cannot hide a LIMIT; a count that is not a plain
    // integer is refused.
    for (const text of [
      "SELECT * FROM Table1 WHERE Tags HAS ANY OF ('a','b') LIMIT 20000",
      'SELECT * FROM Table1 OFFSET 10 LIMIT 20000',
      '(SELECT * FROM Table1) LIMIT 50000',
      'SELECT * FROM Table1 LIMIT 0xC350',
    ]) {
      const r = await send(gw.port, {
        method: 'POST',
        path: sqlPath(1),
        headers: json,
        body: sql(text),
      })
      expect(r.status, text).toBe(400)
    }
  })

  it('reads a ? LIMIT from the parameters', async () => {
    const a = await send(gw.port, {
      method: 'POST',
      path: sqlPath(2),
      headers: json,
      body: sql('SELECT * FROM T LIMIT ?', { parameters: [20000] }),
    })
    expect(a.status).toBe(400)
  })
})

describe('dry-run', () => {
  it('dry-run forwards an over-size call and logs it at warn', async () => {
    const dry = await startLive(
      testYaml(up.url, 'mode: dry-run\nsize_limits: { append_rows: 2, max_body_bytes: 1000 }')
    )
    try {
      const body = bodyWithRows(3)
      const a = await send(dry.port, { method: 'POST', path: rows(20), headers: json, body })
      expect(a.status).toBe(200)
      expect(received.at(-1)!.toString()).toBe(body)
      const line = await dry.waitForLog((l) => l.dry_run === true && l.refused === 'size')
      expect(line).toMatchObject({ level: 'warn', size_limit: 'append_rows', count: 3 })
      // Past max_body_bytes too: forwarded whole.
      const huge = bodyWithRows(400)
      expect(
        (await send(dry.port, { method: 'POST', path: rows(21), headers: json, body: huge })).status
      ).toBe(200)
      expect(sha(received.at(-1)!)).toBe(sha(huge))
    } finally {
      await dry.stop()
    }
  })
})
