import { describe, expect, it } from 'vitest'
import { JsonArrayCounter } from '../../src/http/json-array-count.js'
import { countListRows, countSqlRows, sizeCheckFor } from '../../src/http/size-limits.js'

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = `/api-gateway/api/v2/dtables/${U}/rows/`
const sql = `/api-gateway/api/v2/dtables/${U}/sql`

describe('sizeCheckFor: only the five checked endpoints', () => {
  it.each([
    ['GET', rows, 'list_rows'],
    ['GET', rows.slice(0, -1), 'list_rows'],
    ['POST', rows, 'append_rows'],
    ['PUT', rows, 'update_rows'],
    ['DELETE', rows, 'delete_rows'],
    ['POST', sql, 'sql_list'],
    ['POST', sql + '/', 'sql_list'],
    ['POST', sql.replace(U, U.replace(/-/g, '').toUpperCase()), 'sql_list'],
    ['GET', sql, null],
    ['PATCH', rows, null],
    ['GET', `/api-gateway/api/v2/dtables/${U}/rows/extra`, null],
    ['POST', `/api-gateway/api/v2/dtables/not-a-uuid/rows/`, null],
    ['GET', '/api2/repos/', null],
    ['POST', `/api-gateway/api/v2/dtables/${U}/batch-append-rows/`, null],
  ])('%s %s → %s', (method, path, name) => {
    expect(sizeCheckFor(method, path)?.name ?? null).toBe(name)
  })
})

describe('countListRows: the limit query parameter', () => {
  it.each([
    ['?table_name=T&limit=999', 999],
    ['?table_name=T&limit=1000', 1000],
    ['?table_name=T&limit=1001', 1001],
    ['?limit=5&limit=2000', 2000],
  ])('%s counts %i', (q, n) => {
    expect(countListRows(q)).toEqual({ kind: 'count', count: n })
  })
  it.each(['', '?', '?table_name=T'])('%s counts nothing', (q) => {
    expect(countListRows(q).kind).toBe('none')
  })
  // Issue #15: forms a server's parser reads as 5000 must not pass uncounted.
  it.each([
    '?limit=abc',
    '?limit=',
    '?limit=-5',
    '?limit=%2B5000',
    '?limit=+5000',
    '?limit=5000.0',
    '?limit=5000abc',
    '?limit=5_000',
    '?limit=%EF%BC%95%EF%BC%90%EF%BC%90%EF%BC%90',
    '?limit=0x1388',
    '?limit=5e3',
    '?limit=10&limit=5000.0',
  ])('%s is refused, naming the parameter', (q) => {
    const r = countListRows(q)
    expect(r.kind).toBe('invalid')
    if (r.kind === 'invalid') expect(r.message).toContain('limit')
  })
})

/** The streaming counter over a body's JSON text. */
function countBodyArray(body: unknown, field: string) {
  const c = new JsonArrayCounter(field)
  c.write(Buffer.from(JSON.stringify(body)))
  const r = c.end()
  return r.kind === 'count' ? r : { kind: 'invalid' as const }
}

describe('JsonArrayCounter: rows, updates, row_ids', () => {
  const arr = (n: number) => Array.from({ length: n }, (_, i) => ({ Name: `r${i}` }))
  it.each([999, 1000, 1001, 9999, 10000, 10001])('counts %i entries', (n) => {
    expect(countBodyArray({ table_name: 'T', rows: arr(n) }, 'rows')).toEqual({
      kind: 'count',
      count: n,
    })
    expect(
      countBodyArray(
        { table_name: 'T', row_ids: Array(n).fill('AbCdEfGhIjKlMnOpQrStUv') },
        'row_ids'
      )
    ).toEqual({ kind: 'count', count: n })
  })
  it('counts updates', () => {
    expect(
      countBodyArray({ table_name: 'T', updates: [{ row_id: 'x', row: {} }] }, 'updates')
    ).toEqual({ kind: 'count', count: 1 })
  })
  it.each([
    [[], 'rows'],
    ['text', 'rows'],
    [null, 'rows'],
    [{ table_name: 'T' }, 'rows'],
    [{ rows: 'many' }, 'rows'],
    [{ rows: { 0: 1 } }, 'rows'],
  ])('%j is not the JSON expected', (body, field) => {
    expect(countBodyArray(body, field).kind).toBe('invalid')
  })
})

describe('countSqlRows: the top-level LIMIT of a SELECT', () => {
  it.each([
    ['SELECT * FROM Table1 LIMIT 9999', 9999],
    ['SELECT * FROM Table1 LIMIT 10000', 10000],
    ['SELECT * FROM Table1 LIMIT 10001', 10001],
    ['select Name from `Table 1` where Count > 3 order by Name limit 12000', 12000],
    ['SELECT * FROM t LIMIT 500 OFFSET 20000', 500],
    ['SELECT * FROM t LIMIT 20000, 500', 500],
    ['SELECT * FROM t LIMIT 5, 20000', 20000],
    ['SELECT * FROM (SELECT * FROM t LIMIT 99999) x LIMIT 3', 3],
    ['SELECT a FROM t UNION SELECT a FROM u LIMIT 20000', 20000],
    ["SELECT * FROM t WHERE Name = 'x' LIMIT 11000 -- LIMIT 1", 11000],
  ])('%s counts %i', (text, n) => {
    expect(countSqlRows({ sql: text })).toEqual({ kind: 'count', count: n })
  })

  it.each([
    "SELECT * FROM t WHERE Name = 'LIMIT 99999'",
    'SELECT * FROM t /* LIMIT 99999 */',
    'SELECT * FROM t -- LIMIT 99999',
    'SELECT * FROM t WHERE id IN (SELECT id FROM u LIMIT 99999)',
    'SELECT * FROM Table1',
    "INSERT INTO t (Name) VALUES ('x')",
    'UPDATE t SET Name = 1 LIMIT 99999',
    'DELETE FROM t WHERE Name = 1 LIMIT 99999',
    'SELEC this is not SQL LIMIT 99999',
  ])('%s counts nothing', (text) => {
    expect(countSqlRows({ sql: text }).kind).toBe('none')
  })

  it('reads a ? LIMIT from the parameters', () => {
    expect(
      countSqlRows({ sql: 'SELECT * FROM t WHERE Name = ? LIMIT ?', parameters: ['x', 20000] })
    ).toEqual({ kind: 'count', count: 20000 })
    expect(
      countSqlRows({
        sql: 'SELECT * FROM t WHERE Name = ? LIMIT ?, ?',
        parameters: ['x', 5, 12000],
      })
    ).toEqual({ kind: 'count', count: 12000 })
    expect(
      countSqlRows({ sql: 'SELECT * FROM t LIMIT ? OFFSET ?', parameters: [15000, 0] })
    ).toEqual({ kind: 'count', count: 15000 })
    expect(countSqlRows({ sql: 'SELECT * FROM t LIMIT ?', parameters: ['12000'] })).toEqual({
      kind: 'count',
      count: 12000,
    })
    expect(countSqlRows({ sql: 'SELECT * FROM t LIMIT ?' }).kind).toBe('invalid')
  })

  it.each([[{}], [{ sql: 5 }], [[]], ['SELECT 1']])('%j is not the JSON expected', (body) => {
    expect(countSqlRows(body).kind).toBe('invalid')
  })
})
