import { describe, expect, it } from 'vitest'
import { inProcess } from '../helpers/in-process.js'

// Issue #31 items 2 and 3 (SPEC §4 "Body encodings"): a checked body in an encoding basegate does
// not read is refused, and none of it reaches the server (in process: the gateway's own reading
// of the body, a stub in place of the server). Each case on a base of its own, so
// "forwarded nothing" is the stub having seen no request for that base.

let n = 0
const freshBase = () =>
  `7a1c2a4e-0d3b-4c59-9a51-${(0x3e2d7c8b0000 + ++n).toString(16).padStart(12, '0')}`
const sqlPath = (u: string) => `/api/v2.1/dtable-db/query/${u}/`
const rowsPath = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`
/** `SELECT * FROM T LIMIT 50000` with LIMIT written in UTF-7 (`L` is `+AEw-`). */
const UTF7_SQL = 'SELECT * FROM T +AEw-IMIT 50000'

function multipart(
  parts: { disposition: string; headers?: string[]; value: string }[],
  boundary = 'XyZ'
): string {
  const out = parts.map(
    (p) =>
      `--${boundary}\r\nContent-Disposition: form-data; ${p.disposition}\r\n${(p.headers ?? []).map((h) => h + '\r\n').join('')}\r\n${p.value}\r\n`
  )
  return out.join('') + `--${boundary}--\r\n`
}

describe('bodies read as the server reads them, or refused (issue #31 items 2, 3)', () => {
  const g = inProcess('rate_limits: { base: unlimited }')
  const sawBase = (u: string) => g.forwarded.some((f) => f.pathAndQuery.includes(u))

  const post = async (path: string, contentType: string, body: string, extra = {}) => {
    const a = await g.call('POST', path, {
      headers: { 'content-type': contentType, ...extra },
      body,
    })
    return { status: a.status!, body: a.body }
  }

  const cases: [string, (u: string) => ReturnType<typeof post>, number, RegExp][] = [
    [
      'charset=utf-7 on an urlencoded body',
      (u) =>
        post(
          sqlPath(u),
          'application/x-www-form-urlencoded; charset=utf-7',
          `sql=${encodeURIComponent(UTF7_SQL)}`
        ),
      415,
      /charset "utf-7"/,
    ],
    [
      'charset=utf-7 on a JSON body',
      (u) => post(sqlPath(u), 'application/json; charset=UTF-7', JSON.stringify({ sql: UTF7_SQL })),
      415,
      /charset "UTF-7"/,
    ],
    [
      'charset=utf-7 on a multipart body',
      (u) =>
        post(
          sqlPath(u),
          'multipart/form-data; charset=utf-7; boundary=XyZ',
          multipart([{ disposition: 'name="sql"', value: UTF7_SQL }])
        ),
      415,
      /charset "utf-7"/,
    ],
    [
      'a second rows key hidden by UTF-7 on an append',
      (u) =>
        post(
          rowsPath(u),
          'application/json; charset=utf-7',
          `{"rows":[],"+ACI-rows+ACI-":[${Array.from({ length: 1001 }, () => '{}').join(',')}]}`
        ),
      415,
      /charset "utf-7"/,
    ],
    [
      'a multipart sql part in base64',
      (u) =>
        post(
          sqlPath(u),
          'multipart/form-data; boundary=XyZ',
          multipart([
            {
              disposition: 'name="sql"',
              headers: ['Content-Transfer-Encoding: base64'],
              value: Buffer.from('SELECT * FROM T LIMIT 50000').toString('base64'),
            },
          ])
        ),
      400,
      /Content-Transfer-Encoding "base64"/,
    ],
    [
      'two boundary parameters',
      (u) =>
        post(
          sqlPath(u),
          'multipart/form-data; boundary=AAA; boundary=XyZ',
          `--AAA\r\nContent-Disposition: form-data; name="sql"\r\n\r\nSELECT 1\r\n--AAA--\r\n` +
            multipart([{ disposition: 'name="sql"', value: 'SELECT * FROM T LIMIT 50000' }])
        ),
      400,
      /2 boundary parameters/,
    ],
    [
      "a part named name*=UTF-8''sql",
      (u) =>
        post(
          sqlPath(u),
          'multipart/form-data; boundary=XyZ',
          multipart([
            { disposition: 'name="sql"', value: 'SELECT 1' },
            { disposition: "name*=UTF-8''sql", value: 'SELECT * FROM T LIMIT 50000' },
          ])
        ),
      400,
      /name\*=/,
    ],
    [
      'Content-Encoding: gzip',
      (u) =>
        post(sqlPath(u), 'application/json', JSON.stringify({ sql: 'SELECT 1' }), {
          'content-encoding': 'gzip',
        }),
      415,
      /Content-Encoding "gzip"/,
    ],
  ]

  for (const [name, call, status, message] of cases) {
    it(`${name}: ${status}, nothing forwarded`, async () => {
      const u = freshBase()
      const a = await call(u)
      expect(a.status).toBe(status)
      const msg = JSON.parse(a.body).error_msg as string
      expect(msg).toMatch(message)
      expect(msg).not.toMatch(/TypeError|undefined|Cannot read/)
      expect(sawBase(u)).toBe(false)
      const line = g.requestLines().find((l) => typeof l.path === 'string' && l.path.includes(u))
      expect(line?.status).toBe(status)
    })
  }

  it('the same bodies in utf-8, identity, one boundary and plain names are read and counted', async () => {
    const u = freshBase()
    const over = await post(
      sqlPath(u),
      'multipart/form-data; boundary="XyZ"',
      multipart([
        {
          disposition: 'name="sql"',
          headers: ['Content-Transfer-Encoding: 8bit', 'Content-Type: text/plain; charset=UTF-8'],
          value: 'SELECT * FROM T LIMIT 50000',
        },
      ])
    )
    expect(over.status).toBe(400)
    expect(JSON.parse(over.body).error_msg).toMatch(/sql_list is 10000: 50000/)
    const ok = await post(
      sqlPath(u),
      'application/json; charset=us-ascii',
      JSON.stringify({ sql: 'SELECT * FROM T LIMIT 10' }),
      { 'content-encoding': 'identity' }
    )
    expect(ok.status).toBe(200)
    expect(sawBase(u)).toBe(true)
  })
})
