import type { IncomingMessage } from 'node:http'
import { mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { holds } from '../helpers/until.js'
import { describe, expect, it } from 'vitest'
import { systemClock } from '../../src/clock.js'
import { FakeClock } from '../helpers/clock.js'
import { sizeCheckFor, type BodyCheck } from '../../src/size/actions.js'
import { BufferBudget, type HeldBody } from '../../src/size/body-buffer.js'
import { checkSize, type SizeContext, type SizeResult } from '../../src/size/check.js'
import type { SizeLimits } from '../../src/types.js'
import { MAX_FORM_FIELDS } from '../../src/size/simple-form.js'
import { formFields } from '../../src/size/form-fields.js'

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const LIMITS: SizeLimits = {
  listRows: 1000,
  appendRows: 1000,
  updateRows: 1000,
  deleteRows: 10000,
  sqlList: 10000,
  maxBodyBytes: 1_000_000,
  bufferBytes: 1_000_000,
  spillBytes: 100_000_000,
  bodyTimeoutMs: 30_000,
  clientShare: 1 / 8,
  clientShareText: '1/8',
  minBodyRate: 0,
}
const APPEND = sizeCheckFor('POST', `/api-gateway/api/v2/dtables/${U}/rows/`) as BodyCheck
const SQL = sizeCheckFor('POST', `/api-gateway/api/v2/dtables/${U}/sql`) as BodyCheck

/** A request stream with headers, fed in chunks (as a socket would). */
function fakeReq(body: string | Buffer, chunk = 4096, headers: Record<string, string> = {}) {
  const s = new PassThrough() as PassThrough & {
    headers: Record<string, string>
    rawHeaders: string[]
  }
  s.headers = headers
  s.rawHeaders = Object.entries(headers).flat()
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body)
  queueMicrotask(() => {
    for (let i = 0; i < buf.length; i += chunk) s.write(buf.subarray(i, i + chunk))
    s.end()
  })
  return s as unknown as IncomingMessage
}

/** A context with this process's bounds; `bufferBytes` sets the memory bound alone. */
function ctx(over: Partial<SizeContext> & { bufferBytes?: number } = {}): SizeContext {
  const { bufferBytes = 1_000_000, ...rest } = over
  return {
    limits: LIMITS,
    budget: new BufferBudget(),
    held: {
      memoryBytes: bufferBytes,
      spillBytes: 100_000_000,
      clientBytes: 100_000_000,
      reserveBytes: 0,
    },
    client: 'ip:127.0.0.1',
    timeoutMs: 30_000,
    enforce: true,
    setTimer: (fn, ms) => {
      const timer = systemClock.setTimer(fn, ms)
      return () => timer.cancel()
    },
    ...rest,
  }
}

async function bytesOf(body: HeldBody): Promise<Buffer> {
  const out: Buffer[] = []
  for await (const c of body.chunks()) out.push(c)
  return Buffer.concat(out)
}

async function run(check: BodyCheck, body: string, c = ctx()): Promise<SizeResult> {
  return checkSize(check, fakeReq(body, 7), c)
}

const rows = (n: number, key = 'rows') =>
  `{"table_name":"T","${key}":[${Array.from({ length: n }, (_, i) => `{"n":${i}}`).join(',')}]}`

describe('checkSize: array bodies', () => {
  it('passes 1000 rows and holds them byte for byte', async () => {
    const body = rows(1000)
    const r = await run(APPEND, body)
    expect(r.kind).toBe('pass')
    if (r.kind !== 'pass') return
    expect((await bytesOf(r.body!)).toString()).toBe(body)
    await r.body!.release()
  })

  it.each(['rows', 'Rows', 'ROWS'])(
    'refuses 1001 under key %s, naming the limit and the count',
    async (key) => {
      const r = await run(APPEND, `{"rows":[],${rows(1001, key).slice(1)}`)
      expect(r).toMatchObject({
        kind: 'refused',
        refusal: { status: 400, limitName: 'append_rows', count: 1001 },
      })
    }
  )

  it('refuses a body nested past 512 levels with 400', async () => {
    const r = await run(APPEND, `{"rows":[${'['.repeat(100_000)}`)
    expect(r).toMatchObject({ kind: 'refused', refusal: { status: 400 } })
    if (r.kind === 'refused') expect(r.refusal.message).toContain('512')
  })

  it('forwards a broken rule in dry-run, with the whole body', async () => {
    const body = rows(1001)
    const r = await run(APPEND, body, ctx({ enforce: false }))
    expect(r).toMatchObject({ kind: 'pass', broken: { limitName: 'append_rows', count: 1001 } })
    if (r.kind === 'pass') expect((await bytesOf(r.body!)).toString()).toBe(body)
  })
})

describe('checkSize: SQL bodies', () => {
  it.each([
    ['{"sql":"SELECT * FROM T LIMIT 10001"}', 10001],
    ['{"sql":"SELECT 1","SQL":"SELECT * FROM T LIMIT 20000"}', 20000],
    ['{"Sql":"SELECT * FROM T LIMIT ?","Parameters":["x", 30000]}', null],
    ['{"sql":"SELECT * FROM T WHERE a = ? LIMIT ?","parameters":["x", 30000]}', 30000],
    ['{"sql":"SELECT * FROM T LIMIT ?","parameters":[1],"PARAMETERS":[40000]}', 40000],
  ])('%s', async (body, count) => {
    const r = await run(SQL, body)
    if (count === null) {
      // One `?` reads parameter 1, which is "x": not a plain integer.
      expect(r).toMatchObject({ kind: 'refused', refusal: { status: 400 } })
    } else {
      expect(r).toMatchObject({ kind: 'refused', refusal: { limitName: 'sql_list', count } })
    }
  })

  it.each(['{}', '{"sql":5}', '[]', '"SELECT 1"', '{"sql":"SELECT 1"'])(
    '%s is not the JSON expected',
    async (body) => {
      expect(await run(SQL, body)).toMatchObject({ kind: 'refused', refusal: { status: 400 } })
    }
  )

  it('passes a SELECT at the limit and one without LIMIT', async () => {
    expect((await run(SQL, '{"sql":"SELECT * FROM T LIMIT 10000"}')).kind).toBe('pass')
    expect((await run(SQL, '{"sql":"SELECT * FROM T"}')).kind).toBe('pass')
  })
})

describe('checkSize: the body buffer (SPEC §4 buffer_bytes)', () => {
  it('holds within the budget in memory, and spills past it to an unlinked file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bg-spill-'))
    const budget = new BufferBudget()
    const small = await checkSize(
      APPEND,
      fakeReq(rows(10), 64),
      ctx({ budget, bufferBytes: 100_000, tmpDir: dir })
    )
    expect(small.kind === 'pass' && small.body!.spilled).toBe(false)
    expect(budget.inMemory).toBeGreaterThan(0)
    const body = rows(900)
    const big = await checkSize(
      APPEND,
      fakeReq(body, 1000),
      ctx({ budget, bufferBytes: 5_000, tmpDir: dir })
    )
    expect(big.kind).toBe('pass')
    if (big.kind !== 'pass' || small.kind !== 'pass') return
    expect(big.body!.spilled).toBe(true)
    expect(readdirSync(dir)).toEqual([]) // unlinked at once: nothing to leave behind
    expect((await bytesOf(big.body!)).toString()).toBe(body)
    expect((await bytesOf(big.body!)).toString()).toBe(body) // read again (a retry) is the same
    await big.body!.release()
    await small.body!.release()
    expect(budget.inMemory).toBe(0)
  })

  it('an unwritable directory answers unavailable, never a partial body', async () => {
    const r = await checkSize(
      APPEND,
      fakeReq(rows(900), 1000),
      ctx({ bufferBytes: 10, tmpDir: '/nonexistent/dir' })
    )
    expect(r.kind).toBe('unavailable')
    if (r.kind === 'unavailable') expect(r.message).toContain('ENOENT')
  })

  it('a declared length over max_body_bytes is 413 before a byte is read', async () => {
    const req = fakeReq('', 1, { 'content-length': '5000000' })
    expect(await checkSize(APPEND, req, ctx())).toMatchObject({
      kind: 'refused',
      refusal: { status: 413 },
    })
  })

  it('a client that goes away mid-body is aborted, and its bytes are given back', async () => {
    const budget = new BufferBudget()
    const s = new PassThrough() as PassThrough & {
      headers: Record<string, string>
      rawHeaders: string[]
    }
    s.headers = {}
    s.rawHeaders = []
    const p = checkSize(APPEND, s as unknown as IncomingMessage, ctx({ budget }))
    s.write('{"rows":[1,2,3')
    await holds(() => budget.inMemory > 0) // the bytes are held
    s.destroy(new Error('aborted'))
    expect((await p).kind).toBe('aborted')
    await holds(() => budget.inMemory === 0)
  })
})

describe('checkSize: SQL in a form body (dtable-web-api posts multipart)', () => {
  const multipart = (fields: [string, string][]) => {
    const b = '----basegate'
    const parts = fields.map(
      ([k, v]) => `--${b}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`
    )
    return { body: parts.join('') + `--${b}--\r\n`, type: `multipart/form-data; boundary=${b}` }
  }
  const form = async (body: string, type: string) =>
    checkSize(SQL, fakeReq(body, 5, { 'content-type': type }), ctx())

  it('counts the sql field of a multipart body; the largest of several', async () => {
    const ok = multipart([['sql', 'SELECT * FROM T LIMIT 10000']])
    expect((await form(ok.body, ok.type)).kind).toBe('pass')
    const over = multipart([
      ['sql', 'SELECT * FROM T LIMIT 20000'],
      ['SQL', 'SELECT 1'],
    ])
    expect(await form(over.body, over.type)).toMatchObject({
      kind: 'refused',
      refusal: { count: 20000 },
    })
    const params = multipart([
      ['sql', 'SELECT * FROM T LIMIT ?'],
      ['parameters', '[30000]'],
    ])
    expect(await form(params.body, params.type)).toMatchObject({
      kind: 'refused',
      refusal: { count: 30000 },
    })
  })

  it(`a form of ${MAX_FORM_FIELDS} fields is read; one more is refused 400 unread: urlencoded, multipart in the simple shape and in busboy's`, async () => {
    const fields = (n: number): [string, string][] => [
      ['sql', 'SELECT * FROM T LIMIT 20000'],
      ...Array.from({ length: n - 1 }, (_, i): [string, string] => [`f${i}`, '']),
    ]
    const url = (n: number) => fields(n).map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
    const urlType = 'application/x-www-form-urlencoded'
    // Empty sequences are no fields (WHATWG's reading).
    const atBound = url(MAX_FORM_FIELDS).join('&&')
    expect(await form(atBound, urlType)).toMatchObject({ refusal: { count: 20000 } })
    expect(await form(url(MAX_FORM_FIELDS + 1).join('&'), urlType)).toMatchObject({
      kind: 'refused',
      refusal: { status: 400, message: `the form has more than ${MAX_FORM_FIELDS} fields` },
    })
    // A part with a content type of its own leaves the simple reader: busboy reads the form.
    const viaBusboy = (m: { body: string; type: string }) => ({
      ...m,
      body: m.body.replace('name="f0"\r\n', 'name="f0"\r\nContent-Type: text/plain\r\n'),
    })
    for (const shape of [(m: { body: string; type: string }) => m, viaBusboy]) {
      const ok = shape(multipart(fields(MAX_FORM_FIELDS)))
      expect(await form(ok.body, ok.type)).toMatchObject({ refusal: { count: 20000 } })
      const over = shape(multipart(fields(MAX_FORM_FIELDS + 1)))
      expect(await form(over.body, over.type)).toMatchObject({
        kind: 'refused',
        refusal: { status: 400, message: `the form has more than ${MAX_FORM_FIELDS} fields` },
      })
    }
  })

  it('a multipart form past the bound is not read to its end (300,000 parts: 3.3 s of CPU on 0.7.7)', async () => {
    const part = '--b\r\nContent-Disposition: form-data; name="sql"\r\n\r\nx\r\n'
    const bytes = Buffer.from(part.repeat(300_000) + '--b--\r\n')
    let pulled = 0
    const pieces = Array.from({ length: Math.ceil(bytes.length / 65_536) }, (_, i) =>
      bytes.subarray(i * 65_536, (i + 1) * 65_536)
    )
    const body: HeldBody = {
      length: bytes.length,
      spilled: false,
      chunks: function* () {
        for (const p of pieces) {
          pulled++
          yield p
        }
      },
      slice: async (a, b) => bytes.subarray(a, b),
      release: async () => {},
    }
    const r = await formFields(body, 'multipart/form-data; boundary=b', ['sql'])
    expect(r).toEqual({ error: `the form has more than ${MAX_FORM_FIELDS} fields` })
    // The reading loop has had its turns since.
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(pulled).toBeLessThan(5)
    expect(pieces.length).toBeGreaterThan(200)
  })

  it('counts an urlencoded body, and refuses a form without sql or a broken one', async () => {
    const type = 'application/x-www-form-urlencoded'
    expect(await form('sql=SELECT+*+FROM+T+LIMIT+20000', type)).toMatchObject({
      kind: 'refused',
      refusal: { count: 20000 },
    })
    expect(await form('q=1', type)).toMatchObject({ kind: 'refused', refusal: { status: 400 } })
    expect(await form('--x\r\nbroken', 'multipart/form-data; boundary=x')).toMatchObject({
      kind: 'refused',
      refusal: { status: 400 },
    })
    expect(await form('x', 'multipart/form-data')).toMatchObject({
      kind: 'refused',
      refusal: { status: 400 },
    })
  })
})

describe('checkSize: the held body on the injected clock (issue #32 item 4)', () => {
  it('a body not whole within body_timeout_ms times out when the clock says so, its bytes freed', async () => {
    const clock = new FakeClock(0)
    const budget = new BufferBudget()
    const s = new PassThrough() as PassThrough & {
      headers: Record<string, string>
      rawHeaders: string[]
    }
    s.headers = {}
    s.rawHeaders = []
    const p = checkSize(
      APPEND,
      s as unknown as IncomingMessage,
      ctx({
        budget,
        timeoutMs: 5_000,
        setTimer: (fn, ms) => {
          const t = clock.setTimer(fn, ms)
          return () => t.cancel()
        },
      })
    )
    s.write('{"rows":[1,2,3')
    await holds(() => budget.inMemory > 0) // the bytes are held
    clock.advance(4_999)
    await new Promise((r) => setImmediate(r)) // what the timer would have started has run
    expect(budget.inMemory).toBeGreaterThan(0)
    clock.advance(1)
    expect(await p).toMatchObject({ kind: 'timeout' })
    expect(budget.inMemory).toBe(0)
    expect(budget.inMemory).toBe(0)
  })
})
