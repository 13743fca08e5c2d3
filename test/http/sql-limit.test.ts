import { describe, expect, it } from 'vitest'
import { sqlRowLimit } from '../../src/http/sql-limit.js'

// SPEC §4 / issue #15: the LIMIT reader against the service's own SQL and every trick found.

describe("sqlRowLimit: counts the top-level LIMIT of the service's SQL", () => {
  it.each([
    ["SELECT * FROM Tags WHERE Tags HAS ANY OF ('a','b') LIMIT 20000", 20000],
    ["SELECT Name FROM T WHERE Tags HAS ALL OF ('x') LIMIT 20000", 20000],
    ["SELECT Name FROM T WHERE Tags HAS NONE OF ('x', 'y') LIMIT 20000", 20000],
    ["SELECT * FROM T WHERE Name ILIKE '%abc%' LIMIT 20000", 20000],
    ['SELECT * FROM T OFFSET 10 LIMIT 20000', 20000],
    ['SELECT * FROM T LIMIT 20000 OFFSET 10', 20000],
    ['SELECT * FROM T LIMIT 10, 20000', 20000],
    ['(SELECT * FROM T) LIMIT 50000', 50000],
    ['SELECT a FROM t UNION ALL SELECT a FROM u LIMIT 30000', 30000],
    ['(SELECT a FROM t LIMIT 5) UNION (SELECT a FROM u LIMIT 6) LIMIT 12000', 12000],
    ['SELECT hours(Start, End), COUNT(*) FROM T GROUP BY Owner LIMIT 15000', 15000],
    ["SELECT * FROM T WHERE `limit` = 'LIMIT 1' LIMIT 11000", 11000],
    ['SELECT * FROM T LIMIT\u00a050000', 50000],
    ['SELECT * FROM T LIMIT 18446744073709551615', 18446744073709551615],
    ['select * from t # LIMIT 1\nlimit 10001', 10001],
    ["SELECT * FROM T WHERE a = 'it''s' AND b = \"x\\\"y\" LIMIT 10001", 10001],
    ['SELECT 1; SELECT * FROM T LIMIT 10001', 10001],
    ['WITH x AS (SELECT * FROM T LIMIT 5) SELECT * FROM x LIMIT 10001', 10001],
    ['SELECT * FROM T LIMIT 10000', 10000],
    ['SELECT * FROM T LIMIT 0', 0],
  ])('%s → %d', (sql, n) => {
    expect(sqlRowLimit(sql, undefined)).toEqual({ kind: 'count', count: n })
  })

  it.each([
    'SELECT * FROM T',
    "SELECT * FROM T WHERE Name = 'LIMIT 99999'",
    'SELECT * FROM T /* LIMIT 99999 */',
    'SELECT * FROM T -- LIMIT 99999',
    'SELECT * FROM T WHERE id IN (SELECT id FROM u LIMIT 99999)',
    'INSERT INTO T (Name) SELECT Name FROM U LIMIT 99999',
    'UPDATE T SET Name = 1 LIMIT 99999',
    'DELETE FROM T WHERE Name = 1 LIMIT 99999',
    "SELECT * FROM T WHERE Name = 'unclosed LIMIT 99999",
  ])('%s counts nothing', (sql) => {
    expect(sqlRowLimit(sql, undefined).kind).toBe('none')
  })

  it.each([
    'SELECT * FROM T LIMIT 50000.0',
    'SELECT * FROM T LIMIT 0xC350',
    'SELECT * FROM T LIMIT 5e4',
    "SELECT * FROM T LIMIT '50000'",
    'SELECT * FROM T LIMIT -5',
    'SELECT * FROM T LIMIT (50000)',
    'SELECT * FROM T LIMIT 5 * 10000',
    'SELECT * FROM T LIMIT \uff15\uff10\uff10\uff10\uff10',
    'SELECT * FROM T LIMIT',
  ])('%s is refused (not a plain non-negative integer)', (sql) => {
    expect(sqlRowLimit(sql, undefined).kind).toBe('invalid')
  })

  it('takes LIMIT ? from the parameters, counting the ? before it outside strings and comments', () => {
    const sql = "SELECT * FROM T WHERE a = '?' AND b = ? /* ? */ LIMIT ?"
    expect(sqlRowLimit(sql, ['x', 20000])).toEqual({ kind: 'count', count: 20000 })
    expect(sqlRowLimit('SELECT * FROM T LIMIT ?, ?', [5, '12000'])).toEqual({
      kind: 'count',
      count: 12000,
    })
    expect(sqlRowLimit('SELECT * FROM T LIMIT ?', [1.5]).kind).toBe('invalid')
    expect(sqlRowLimit('SELECT * FROM T LIMIT ?', ['5e4']).kind).toBe('invalid')
    expect(sqlRowLimit('SELECT * FROM T LIMIT ?', []).kind).toBe('invalid')
  })
})

/** A seeded generator, so a failure names its case. */
function rng(seed: number) {
  return () => (seed = (seed * 48271) % 2147483647) / 2147483647
}

/** The naive oracle: strip strings and comments, then read the last LIMIT outside parentheses. */
function oracle(sql: string): number | null {
  const stripped = sql
    .replace(/'(?:[^'\\]|\\.|'')*'/g, "''")
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/--[^\n]*/g, ' ')
  let depth = 0
  let top = ''
  for (const c of stripped) {
    if (c === '(') depth++
    else if (c === ')') depth--
    else if (depth === 0) top += c
  }
  const all = [...top.matchAll(/\blimit\s+(\d+)/gi)]
  return all.length === 0 ? null : Number(all.at(-1)![1])
}

describe('sqlRowLimit: property test against a naive oracle on the de-commented text', () => {
  it('agrees on 2,000 random nestings, strings and comments around a LIMIT', () => {
    const r = rng(20261123)
    const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!
    const noise = [
      "'LIMIT 99999'",
      "'it''s'",
      "'a\\'b'",
      '/* LIMIT 77777 */',
      '-- LIMIT 66666\n',
      '(SELECT x FROM y LIMIT 55555)',
      "HAS ANY OF ('a', 'b')",
      "ILIKE '%q%'",
      'hours(a, b)',
      '((1 + 2))',
    ]
    for (let i = 0; i < 2000; i++) {
      const parts = ['SELECT * FROM T WHERE']
      for (let k = Math.floor(r() * 5); k > 0; k--) parts.push(pick(noise))
      const withLimit = r() < 0.8
      const n = Math.floor(r() * 40000)
      if (withLimit) parts.push(`LIMIT ${n}`)
      for (let k = Math.floor(r() * 2); k > 0; k--) parts.push(pick(['/* tail */', '-- tail\n']))
      const sql = parts.join(' ')
      const want = oracle(sql)
      const got = sqlRowLimit(sql, undefined)
      expect(got, sql).toEqual(want === null ? { kind: 'none' } : { kind: 'count', count: want })
    }
  })
})
