import { describe, expect, it } from 'vitest'
import { rng } from '../helpers/rng.js'
import { MAX_SQL_DEPTH, readingsOf, sqlRowLimit, strictRowLimit } from '../../src/size/sql-limit.js'

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
    // Issue #20: where dialects read the text differently, the larger reading counts.
    ['(SELECT * FROM T LIMIT 50000)', 50000],
    ['((SELECT * FROM T LIMIT 50000))', 50000],
    ['SELECT a FROM t UNION (SELECT a FROM u LIMIT 50000)', 50000],
    ['SELECT a FROM t UNION ALL (SELECT a FROM u LIMIT 50000)', 50000],
    ['SELECT * FROM T WHERE a = 1--1 LIMIT 50000', 50000],
    ["SELECT * FROM T WHERE Name = 'a\\' LIMIT 50000 -- '", 50000],
    ['SELECT * FROM T /*! LIMIT 50000 */', 50000],
    ['SELECT * FROM T /*!50000 LIMIT 50000 */', 50000],
    ['SELECT * FROM T -- x\r LIMIT 50000', 50000],
    ['SELECT * FROM T LIMIT\u0085 50000', 50000],
    ['SELECT * FROM T LIMIT\u200b50000', 50000],
    ['SELECT * FROM T FETCH NEXT 50000 ROWS ONLY', 50000],
    ['SELECT * FROM T OFFSET 5 ROWS FETCH FIRST 50000 ROW ONLY', 50000],
    ['SELECT * FROM T FETCH FIRST ROW ONLY', 1],
    ['SELECT TOP 50000 * FROM T', 50000],
    ['SELECT DISTINCT TOP (50000) Name FROM T', 50000],
    ['SELECT * FROM T WHERE a = 1 # x\nLIMIT 50000', 50000],
    ['SELECT a # b FROM T LIMIT 50000', 50000],
    ['SELECT * FROM T LIMIT 10 UNION SELECT * FROM U LIMIT 50000', 50000],
    // Issue #39 item 5: PostgreSQL's dollar quotes and Oracle's q-quotes are strings where they
    // are read so: a quote character inside them must not swallow the LIMIT that follows.
    ["SELECT * FROM T WHERE a = $$ ' $$ LIMIT 50000", 50000],
    ["SELECT * FROM T WHERE a = $x$ it's $x$ LIMIT 50000", 50000],
    ["SELECT * FROM T WHERE a = q'[ it's ]' LIMIT 50000", 50000],
    ["SELECT * FROM T WHERE a = Q'{ ' }' LIMIT 50000", 50000],
    ["SELECT * FROM T WHERE a = nq'! ' !' LIMIT 50000", 50000],
    // ... and their insides are text where they are strings: the larger reading still counts.
    ['SELECT * FROM T WHERE a = $$ LIMIT 1 $$ LIMIT 50000', 50000],
  ])('%s → %d', (sql, n) => {
    expect(sqlRowLimit(sql, undefined)).toEqual({ kind: 'count', count: n })
  })

  it.each([
    'SELECT * FROM T',
    "SELECT * FROM T WHERE Name = 'LIMIT 99999'",
    'SELECT * FROM T /* LIMIT 99999 */',
    'SELECT * FROM T -- LIMIT 99999',
    'SELECT * FROM T WHERE id IN (SELECT id FROM u LIMIT 99999)',
    'SELECT * FROM (SELECT * FROM u LIMIT 99999) AS x',
    'SELECT top FROM T',
    'SELECT * FROM T -- LIMIT 99999\r\n',
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
/**
 * The naive oracle: strip strings and comments, then read the LIMITs outside parentheses; the
 * largest, over the two ways of reading a backslash in a string (MySQL's escape, and the
 * standard's plain character).
 */
function oracle(sql: string): number | null {
  const readings = [/'(?:[^'\\]|\\.|'')*('|$)/g, /'(?:[^']|'')*('|$)/g]
  let best: number | null = null
  for (const strings of readings) {
    const stripped = sql
      .replace(strings, "''")
      .replace(/\/\*[\s\S]*?\*\//g, ' ')
      .replace(/--[^\n]*/g, ' ')
    let depth = 0
    let top = ''
    for (const c of stripped) {
      if (c === '(') depth++
      else if (c === ')') depth = Math.max(0, depth - 1)
      else if (depth === 0) top += c
    }
    for (const m of top.matchAll(/\blimit\s+(\d+)/gi)) best = Math.max(best ?? 0, Number(m[1]))
  }
  return best
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

describe('readingsOf: a text is read once per way its own characters allow', () => {
  it.each([
    ['SELECT * FROM T LIMIT 5', 1],
    ['SELECT 1--1', 2],
    ["SELECT 'a\\'", 2],
    ['SELECT 1--1 /*! x */ # \r', 16],
    ["SELECT 1--1 /*! x */ # \r '\\'", 32],
  ])('%s: %i readings', (sql, n) => {
    expect(readingsOf(sql)).toHaveLength(n)
  })
})

describe('strictRowLimit: a statement too long to read in every dialect', () => {
  const pad = (sql: string) => `${sql} AND a IN (${"'x\\\\', 1--1, ".repeat(40_000)}1)`

  // What it costs is the bench's (BENCH_ONLY=size: a 500 KB statement), not a clock here.
  it('still finds every row count', () => {
    const sql = pad("SELECT * FROM T WHERE Name = 'a\\' LIMIT 50000 -- '") + ' LIMIT 5'
    expect(sql.length).toBeGreaterThan(500_000)
    expect(sqlRowLimit(sql, [])).toEqual({ kind: 'count', count: 50000 })
  })

  it('counts LIMIT m, n, TOP, FETCH, and LIMIT ? as the largest integer parameter', () => {
    expect(strictRowLimit(pad('SELECT 1 LIMIT 10, 20000'), src([]))).toEqual({
      kind: 'count',
      count: 20000,
    })
    expect(strictRowLimit(pad('SELECT TOP (30000) a'), src([]))).toEqual({
      kind: 'count',
      count: 30000,
    })
    expect(strictRowLimit(pad('SELECT a FETCH NEXT 40000 ROWS ONLY'), src([]))).toEqual({
      kind: 'count',
      count: 40000,
    })
    expect(strictRowLimit(pad('SELECT a LIMIT ?'), src(['x', 3, '12000']))).toEqual({
      kind: 'count',
      count: 12000,
    })
    expect(strictRowLimit(pad('SELECT a LIMIT ?'), src(['x'])).kind).toBe('invalid')
    expect(strictRowLimit(pad('SELECT a LIMIT 5*10000'), src([])).kind).toBe('invalid')
    expect(strictRowLimit(pad('SELECT a FROM desktop'), src([])).kind).toBe('none')
  })
})

function src(list: unknown[]) {
  return { at: (i: number) => list[i], each: (fn: (v: unknown) => void) => list.forEach(fn) }
}

describe('issue #31 item 6: two more readings', () => {
  it('LIMIT ? after a ? in a comment or a string counts as a server filling every ? in order would read it', () => {
    expect(sqlRowLimit('SELECT * FROM t WHERE a = ? -- ?\nLIMIT ?', [5, 10, 50000])).toEqual({
      kind: 'count',
      count: 50000,
    })
    expect(sqlRowLimit("SELECT * FROM t WHERE b = '?' LIMIT ?", [50000, 10])).toEqual({
      kind: 'count',
      count: 50000,
    })
    // Without a ? outside the statement's own, nothing changes.
    expect(sqlRowLimit('SELECT * FROM t WHERE a = ? LIMIT ?', ['x', 10])).toEqual({
      kind: 'count',
      count: 10,
    })
  })

  it('counts the ? before each ? exactly, however many, in one pass over the text', () => {
    // Raw order: a (0), the string's (1), c (2), the comment's (3), LIMIT (4); its own index is 2.
    const sql = "SELECT * FROM t WHERE a = ? AND b = '?' AND c = ? /* ? */ LIMIT ?"
    expect(sqlRowLimit(sql, ['x', 'x', 10, 'x', 50000])).toEqual({ kind: 'count', count: 50000 })
    expect(sqlRowLimit(sql, ['x', 'x', 50000, 'x', 10])).toEqual({ kind: 'count', count: 50000 })
    expect(sqlRowLimit(sql, ['x', 'x', 10, 'x', 20])).toEqual({ kind: 'count', count: 20 })
    // A statement of k of them: each ? is found once, not once per ? after it (k² steps: 50,000
    // in 100 KB once held the loop 14.5 s). Counted as the searches for a ?, not as time.
    const k = 5_000
    const many = `SELECT * FROM T WHERE a IN (${Array(k).fill('?').join(',')}) LIMIT ?`
    const indexOf = String.prototype.indexOf
    let searches = 0
    String.prototype.indexOf = function (this: string, s: string, from?: number) {
      if (s === '?') searches++
      return indexOf.call(this, s, from)
    }
    try {
      const params = [...Array<number>(k).fill(1), 40000]
      expect(sqlRowLimit(many, params)).toEqual({ kind: 'count', count: 40000 })
    } finally {
      String.prototype.indexOf = indexOf
    }
    expect(searches).toBeLessThan(4 * k)
  })

  it(`reads ${MAX_SQL_DEPTH} levels of parentheses and refuses one more, however deep (no stack overflow)`, () => {
    const nested = (d: number) => `SELECT * FROM T WHERE ${'('.repeat(d)}1${')'.repeat(d)} LIMIT 10`
    expect(sqlRowLimit(nested(MAX_SQL_DEPTH), [])).toEqual({ kind: 'count', count: 10 })
    const refused = {
      kind: 'invalid',
      message: `the statement nests parentheses deeper than ${MAX_SQL_DEPTH} levels`,
    }
    expect(sqlRowLimit(nested(MAX_SQL_DEPTH + 1), [])).toEqual(refused)
    // 20,000 levels overflowed the readers' recursion (a RangeError, answered 500).
    expect(sqlRowLimit(nested(20_000), [])).toEqual(refused)
    expect(sqlRowLimit(`SELECT * FROM T WHERE ${'('.repeat(20_000)} LIMIT 10`, [])).toEqual(refused)
    // In a string they are text, in every reading.
    expect(sqlRowLimit(`SELECT '${'('.repeat(20_000)}' LIMIT 10`, [])).toEqual({
      kind: 'count',
      count: 10,
    })
  })

  it('[…] is a quoted identifier in SQL Server and SQLite: a quote inside it hides nothing', () => {
    expect(sqlRowLimit("SELECT [a'] FROM t LIMIT 50000 -- ']", [])).toEqual({
      kind: 'count',
      count: 50000,
    })
    expect(sqlRowLimit("SELECT [a]]'] FROM t LIMIT 40000", [])).toEqual({
      kind: 'count',
      count: 40000,
    })
    // A [ inside a string stays in the string.
    expect(sqlRowLimit("SELECT * FROM t WHERE b = '[x' LIMIT 10", [])).toEqual({
      kind: 'count',
      count: 10,
    })
  })
})
