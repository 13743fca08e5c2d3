// SPEC §4: the row count of a SELECT's top-level LIMIT, found from the statement's tokens
// (strings, quoted identifiers, comments, parentheses, separators) and from no SQL dialect's
// grammar, so that the service's own SQL (`HAS ANY OF`, `ILIKE`, `OFFSET m LIMIT n`, its
// functions) can never hide a LIMIT from the check.
//
// Where dialects split the same text into different tokens (is `--1` a comment? does `\'` end
// a string? is `/*! … */` code?), the text is read once per way that its own characters make
// possible, and the reading that finds the larger row count is the one checked: a server of
// any of those dialects returns at most that many rows.

type Tok =
  | { t: 'word'; v: string }
  | { t: 'str' }
  | { t: 'ident' }
  | { t: 'group'; items: Tok[] }
  | { t: 'semi' }
  | { t: 'comma' }
  /**
   * `?`: `index` counts the parameters this reading sees before it; `rawIndex` counts every `?`
   * of the text before it, as a server that fills parameters without lexing would.
   */
  | { t: 'param'; index: number; rawIndex: number }
  | { t: 'punct'; v: string }

/** How one dialect splits text; each flag is a point where dialects disagree. */
export interface Reading {
  /** `--` starts a comment only before white space or a control character (MySQL). */
  dashNeedsSpace: boolean
  /** A backslash escapes the next character inside quotes (MySQL); standard SQL: it does not. */
  backslashEscapes: boolean
  /** `/*! … *\/` is code (MySQL's executable comment), not a comment. */
  bangIsCode: boolean
  /** A carriage return ends a line comment, not only a line feed. */
  crEndsComment: boolean
  /** `#` starts a line comment (MySQL); elsewhere it is an operator. */
  hashComment: boolean
  /** `[…]` quotes an identifier (SQL Server, SQLite); elsewhere `[` is an operator. */
  bracketIdents: boolean
  /** `$$…$$` and `$tag$…$tag$` are strings (PostgreSQL); elsewhere `$` is part of a word. */
  dollarQuotes: boolean
  /** `q'[…]'` (also `Q`, `nq`, any delimiter) is a string (Oracle); elsewhere `q` is a word. */
  qQuotes: boolean
}

const BASE_READING: Reading = {
  dashNeedsSpace: false,
  backslashEscapes: true,
  bangIsCode: false,
  crEndsComment: false,
  hashComment: true,
  bracketIdents: false,
  dollarQuotes: false,
  qQuotes: false,
}

/** A PostgreSQL dollar quote's opening delimiter at the start of `text` (`$$`, `$tag$`). */
const DOLLAR_OPEN = /^\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/
/** Where a dollar quote or an Oracle q-quote may begin (at a word's start). */
const DOLLAR_ANYWHERE = /(?:^|[^A-Za-z0-9_$])\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/
const Q_ANYWHERE = /(?:^|[^A-Za-z0-9_$])[nN]?[qQ]'/

/**
 * The readings worth trying for `sql`: a flag flips only when the text has the characters
 * where the dialects part, so ordinary SQL is read once.
 */
export function readingsOf(sql: string): Reading[] {
  const flips: ((r: Reading) => Reading)[] = []
  // Each pattern's regular expression only after a plain search for the characters it needs
  // (issue #47: the two that try every position were a sixth of a 1 KB statement's reading).
  if (sql.includes('--') && /--[^\s]/.test(sql)) flips.push((r) => ({ ...r, dashNeedsSpace: true }))
  if (sql.includes('\\')) flips.push((r) => ({ ...r, backslashEscapes: false }))
  if (sql.includes('/*!')) flips.push((r) => ({ ...r, bangIsCode: true }))
  if (sql.includes('\r')) flips.push((r) => ({ ...r, crEndsComment: true }))
  if (sql.includes('#')) flips.push((r) => ({ ...r, hashComment: false }))
  if (sql.includes('[')) flips.push((r) => ({ ...r, bracketIdents: true }))
  if (sql.includes('$') && DOLLAR_ANYWHERE.test(sql))
    flips.push((r) => ({ ...r, dollarQuotes: true }))
  if ((sql.includes("q'") || sql.includes("Q'")) && Q_ANYWHERE.test(sql))
    flips.push((r) => ({ ...r, qQuotes: true }))
  let out = [BASE_READING]
  for (const flip of flips) out = out.flatMap((r) => [r, flip(r)])
  return out
}

/**
 * White space as any dialect may read it: JS's \s, and the characters some servers' lexers
 * also skip (NEL, Mongolian vowel separator, zero-width spaces, word joiner), so that
 * `LIMIT\u0085 50000` is never read as one word.
 */
function isSpace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d) || c === 0x00
  if (c < 0x85) return false
  if (c === 0x85 || c === 0x180e || (c >= 0x200b && c <= 0x200d) || c === 0x2060) return true
  return /\s/.test(String.fromCharCode(c))
}

/** Word characters: letters, digits, `_`, `.`, `$`, and anything past ASCII that is not space. */
function isWord(c: number): boolean {
  if (c < 0x80) {
    return (
      (c >= 0x61 && c <= 0x7a) ||
      (c >= 0x41 && c <= 0x5a) ||
      (c >= 0x30 && c <= 0x39) ||
      c === 0x5f ||
      c === 0x2e ||
      c === 0x24
    )
  }
  return !isSpace(c)
}

/** White space or a comment at `i` (`c` its first character): the index after it, or -1. */
function skipFrom(sql: string, i: number, c: number, reading: Reading): number {
  if (isSpace(c)) return i + 1
  if (c === 0x2d && sql.charCodeAt(i + 1) === 0x2d && dashComment(sql, i, reading))
    return lineEnd(sql, i, reading)
  if (c === 0x23 && reading.hashComment) return lineEnd(sql, i, reading)
  if (c === 0x2f && sql.charCodeAt(i + 1) === 0x2a) {
    if (reading.bangIsCode && sql.charCodeAt(i + 2) === 0x21) {
      // MySQL runs the comment's text: read on inside it; its `*/` is skipped below.
      i += 3
      while (i < sql.length && isDigitCode(sql.charCodeAt(i))) i++ // an optional version number
      return i
    }
    const end = sql.indexOf('*/', i + 2)
    return end === -1 ? sql.length : end + 2
  }
  // The end of an executable comment.
  if (c === 0x2a && sql.charCodeAt(i + 1) === 0x2f && reading.bangIsCode) return i + 2
  return -1
}

/**
 * Parentheses nested deeper than this are refused (400), as the JSON scanner refuses nesting
 * past its MAX_DEPTH: the readers of the groups recurse, and 20,000 levels overflowed the
 * stack (a 500). SQLite stops expressions at 1,000 levels; no query a person writes nears 512.
 */
export const MAX_SQL_DEPTH = 512

/**
 * Splits SQL into tokens, parentheses as nested groups; null when they nest deeper than
 * MAX_SQL_DEPTH. Never throws: an unclosed run ends the text.
 */
function tokenize(sql: string, reading: Reading): Tok[] | null {
  const root: Tok[] = []
  const stack: Tok[][] = [root]
  let out = root
  let params = 0
  // The `?`s of the text before rawFrom, strings and comments included (a param's rawIndex).
  let rawSeen = 0
  let rawFrom = 0
  let i = 0
  const n = sql.length
  while (i < n) {
    const c = sql.charCodeAt(i)
    const skipped = skipFrom(sql, i, c, reading)
    if (skipped !== -1) {
      i = skipped
    } else if (c === 0x27 || c === 0x22) {
      i = quotedEnd(sql, i, sql[i]!, reading.backslashEscapes)
      out.push({ t: 'str' })
    } else if (c === 0x60) {
      i = quotedEnd(sql, i, '`', false)
      out.push({ t: 'ident' })
    } else if (c === 0x5b && reading.bracketIdents) {
      i = quotedEnd(sql, i, ']', false)
      out.push({ t: 'ident' })
    } else if (c === 0x28) {
      if (stack.length > MAX_SQL_DEPTH) return null
      const group: Tok = { t: 'group', items: [] }
      out.push(group)
      stack.push(group.items)
      out = group.items
      i++
    } else if (c === 0x29) {
      // An unmatched `)` is dropped: the text stays at the top level.
      if (stack.length > 1) {
        stack.pop()
        out = stack[stack.length - 1]!
      }
      i++
    } else if (c === 0x3b) {
      out.push({ t: 'semi' })
      i++
    } else if (c === 0x2c) {
      out.push({ t: 'comma' })
      i++
    } else if (c === 0x3f) {
      // Counted on from the last `?` met, not from the start: a statement of k of them once
      // took k² steps (50,000 in 100 KB held the loop 14.5 s).
      const rawIndex = rawSeen + questionMarks(sql, rawFrom, i)
      out.push({ t: 'param', index: params++, rawIndex })
      rawSeen = rawIndex + 1
      rawFrom = i + 1
      i++
    } else if (c === 0x24 && reading.dollarQuotes && DOLLAR_OPEN.test(sql.slice(i, i + 66))) {
      // PostgreSQL: `$tag$ … $tag$` is a string, whatever it holds (a `'`, a LIMIT).
      const tag = DOLLAR_OPEN.exec(sql.slice(i, i + 66))![0]
      const end = sql.indexOf(tag, i + tag.length)
      i = end === -1 ? n : end + tag.length
      out.push({ t: 'str' })
    } else if (reading.qQuotes && qQuoteAt(sql, i) !== -1) {
      i = qQuoteAt(sql, i)
      out.push({ t: 'str' })
    } else if (isWord(c)) {
      let j = i + 1
      while (j < n && isWord(sql.charCodeAt(j))) j++
      out.push({ t: 'word', v: sql.slice(i, j) })
      i = j
    } else {
      out.push({ t: 'punct', v: sql[i]! })
      i++
    }
  }
  return root
}

const Q_CLOSE: Record<string, string> = { '[': ']', '(': ')', '{': '}', '<': '>' }

/**
 * Oracle's alternative quoting at `i` (`q'[…]'`, `Q'{…}'`, `nq'!…!'`): the index past its end,
 * or -1 when no q-quote starts there.
 */
function qQuoteAt(sql: string, i: number): number {
  let j = i
  if (sql[j] === 'n' || sql[j] === 'N') j++
  if ((sql[j] !== 'q' && sql[j] !== 'Q') || sql[j + 1] !== "'" || j + 2 >= sql.length) return -1
  const open = sql[j + 2]!
  const close = (Q_CLOSE[open] ?? open) + "'"
  const end = sql.indexOf(close, j + 3)
  return end === -1 ? sql.length : end + 2
}

/** Every `?` of the text in [from, to), in strings and comments too. */
function questionMarks(sql: string, from: number, to: number): number {
  let n = 0
  for (let i = sql.indexOf('?', from); i !== -1 && i < to; i = sql.indexOf('?', i + 1)) n++
  return n
}

function isDigitCode(c: number): boolean {
  return c >= 0x30 && c <= 0x39
}

/** `--` at i starts a comment: always in standard SQL; in MySQL only before a space or control character. */
function dashComment(sql: string, i: number, reading: Reading): boolean {
  if (!reading.dashNeedsSpace) return true
  const next = sql.charCodeAt(i + 2)
  return Number.isNaN(next) || next <= 0x20
}

function lineEnd(sql: string, i: number, reading: Reading): number {
  let end = sql.indexOf('\n', i)
  if (reading.crEndsComment) {
    const cr = sql.indexOf('\r', i)
    if (cr !== -1 && (end === -1 || cr < end)) end = cr
  }
  return end === -1 ? sql.length : end + 1
}

/** The index past a quoted run: a doubled quote is one quote; a backslash escapes where the reading says so. */
function quotedEnd(sql: string, i: number, q: string, backslash: boolean): number {
  let j = i + 1
  while (j < sql.length) {
    const c = sql[j]!
    if (backslash && c === '\\') j += 2
    else if (c === q && sql[j + 1] === q) j += 2
    else if (c === q) return j + 1
    else j++
  }
  return sql.length
}

export type SqlLimit =
  { kind: 'none' } | { kind: 'count'; count: number } | { kind: 'invalid'; message: string }

const PLAIN = /^[0-9]+$/
const ARITHMETIC = new Set(['+', '-', '*', '/', '%', '^', '|', '&'])
const SELECTS = new Set(['select', 'with', 'values', 'table'])
const SET_OPERATORS = new Set(['union', 'intersect', 'except', 'minus'])

const isWordTok = (tok: Tok | undefined, v: string): boolean =>
  tok?.t === 'word' && tok.v.toLowerCase() === v

/** The first word of a statement, however deep in parentheses. */
function firstWord(toks: readonly Tok[]): string {
  for (const tok of toks) {
    if (tok.t === 'word') return tok.v.toLowerCase()
    if (tok.t === 'group') return firstWord(tok.items)
    return ''
  }
  return ''
}

/** The statements of a token list, split at top-level `;`. */
function statements(toks: readonly Tok[]): Tok[][] {
  const out: Tok[][] = [[]]
  for (const tok of toks) {
    if (tok.t === 'semi') out.push([])
    else out[out.length - 1]!.push(tok)
  }
  return out
}

/** The value of one row-count token: a plain non-negative integer, or `?` from parameters. */
function rowCount(
  tok: Tok | undefined,
  param: (i: number) => unknown,
  what: string
): number | string {
  if (tok === undefined) return `${what} has no row count`
  if (tok.t === 'word') {
    if (PLAIN.test(tok.v)) return Number(tok.v)
    return `${what} ${tok.v} is not a plain non-negative integer`
  }
  if (tok.t === 'param') {
    // A server that lexes reads parameter `index`; one that fills every `?` of the text in
    // order reads `rawIndex` (a `?` in a comment or a string moves it): the larger counts.
    const own = plainParam(param(tok.index))
    const raw = tok.rawIndex === tok.index ? own : plainParam(param(tok.rawIndex))
    if (own !== null || raw !== null) return Math.max(own ?? 0, raw ?? 0)
    const p = param(tok.index)
    return `${what} ? takes parameter ${tok.index + 1}, which is not a plain non-negative integer (${JSON.stringify(p ?? null)})`
  }
  return `${what} is followed by something that is not a plain non-negative integer`
}

function plainParam(p: unknown): number | null {
  if (typeof p === 'number' && Number.isSafeInteger(p) && p >= 0) return p
  if (typeof p === 'string' && PLAIN.test(p)) return Number(p)
  return null
}

/** One LIMIT at `at`: `LIMIT n`, `LIMIT n OFFSET m`, `LIMIT m, n` (counts n). */
function limitAt(top: readonly Tok[], at: number, param: (i: number) => unknown): SqlLimit {
  let countTok = top[at + 1]
  let next = at + 2
  if (top[at + 2]?.t === 'comma') {
    countTok = top[at + 3]
    next = at + 4
  } else if (isWordTok(top[at + 2], 'offset')) {
    next = at + 4
  }
  const count = rowCount(countTok, param, 'LIMIT')
  if (typeof count === 'string') return { kind: 'invalid', message: count }
  const after = top[next]
  if (after?.t === 'punct' && ARITHMETIC.has(after.v)) {
    return { kind: 'invalid', message: 'LIMIT is an expression, not a plain non-negative integer' }
  }
  return { kind: 'count', count }
}

/** `FETCH FIRST|NEXT [n] ROW|ROWS ONLY` at `at` (the standard's LIMIT; no n is one row). */
function fetchAt(top: readonly Tok[], at: number, param: (i: number) => unknown): SqlLimit {
  if (!isWordTok(top[at + 1], 'first') && !isWordTok(top[at + 1], 'next')) return { kind: 'none' }
  const n = top[at + 2]
  if (isWordTok(n, 'row') || isWordTok(n, 'rows')) return { kind: 'count', count: 1 }
  const count = rowCount(n, param, 'FETCH')
  if (typeof count === 'string') return { kind: 'invalid', message: count }
  return { kind: 'count', count }
}

/** `SELECT [ALL|DISTINCT] TOP n` (SQL Server) at the start of a query: n, when it is a number. */
function topAt(top: readonly Tok[]): SqlLimit {
  let at = 1
  if (isWordTok(top[at], 'distinct') || isWordTok(top[at], 'all')) at++
  if (!isWordTok(top[at], 'top')) return { kind: 'none' }
  const n = top[at + 1]
  const inner = n?.t === 'group' && n.items.length === 1 ? n.items[0] : n
  // `SELECT top FROM t` names a column: only a number makes it a row count.
  return inner?.t === 'word' && PLAIN.test(inner.v)
    ? { kind: 'count', count: Number(inner.v) }
    : { kind: 'none' }
}

function larger(a: SqlLimit, b: SqlLimit): SqlLimit {
  if (a.kind === 'invalid') return a
  if (b.kind === 'invalid') return b
  if (b.kind === 'none') return a
  if (a.kind === 'none') return b
  return b.count > a.count ? b : a
}

/**
 * The largest row count a query's top level asks for: every LIMIT and FETCH outside
 * parentheses, a leading TOP, and the queries of its parenthesised set-operation branches
 * (`(SELECT … LIMIT n) UNION …`, or a statement wholly in parentheses), which some dialects
 * read as the whole result's. A subquery elsewhere (`IN (…)`, `FROM (…)`, a CTE) is not the
 * result's row count and is not looked into.
 */
function queryLimit(top: readonly Tok[], param: (i: number) => unknown): SqlLimit {
  let best: SqlLimit = isWordTok(top[0], 'select') ? topAt(top) : { kind: 'none' }
  for (let i = 0; i < top.length; i++) {
    const tok = top[i]!
    if (tok.t === 'word') {
      const v = tok.v.toLowerCase()
      if (v === 'limit') best = larger(best, limitAt(top, i, param))
      else if (v === 'fetch') best = larger(best, fetchAt(top, i, param))
    } else if (tok.t === 'group' && isBranch(top, i)) {
      best = larger(best, queryLimit(tok.items, param))
    }
    if (best.kind === 'invalid') return best
  }
  return best
}

/** A parenthesised group at `i` is a query branch: it holds a query, and starts the list or follows a set operator. */
function isBranch(top: readonly Tok[], i: number): boolean {
  const g = top[i] as { items: Tok[] }
  if (!SELECTS.has(firstWord(g.items))) return false
  if (i === 0) return true
  let j = i - 1
  if (isWordTok(top[j], 'all') || isWordTok(top[j], 'distinct')) j--
  const before = top[j]
  return before?.t === 'word' && SET_OPERATORS.has(before.v.toLowerCase())
}

/** One reading's largest top-level row count over the SELECT statements of the text. */
function readingLimit(sql: string, reading: Reading, param: (i: number) => unknown): SqlLimit {
  let best: SqlLimit = { kind: 'none' }
  const toks = tokenize(sql, reading)
  if (toks === null)
    return {
      kind: 'invalid',
      message: `the statement nests parentheses deeper than ${MAX_SQL_DEPTH} levels`,
    }
  for (const st of statements(toks)) {
    if (!SELECTS.has(firstWord(st))) continue
    best = larger(best, queryLimit(st, param))
    if (best.kind === 'invalid') return best
  }
  return best
}

/** The body's `parameters`: read by index, or all of them (the strict reading). */
export interface ParamSource {
  at(index: number): unknown
  each(fn: (value: unknown) => void): void
}

function paramSource(parameters: unknown): ParamSource {
  if (
    parameters !== null &&
    typeof parameters === 'object' &&
    'at' in parameters &&
    'each' in parameters
  )
    return parameters as ParamSource
  const list = Array.isArray(parameters) ? (parameters as unknown[]) : []
  return { at: (i) => list[i], each: (fn) => list.forEach((v) => fn(v)) }
}

/**
 * Characters × readings read at the most (about a tenth of a second of one core). A longer
 * statement is read strictly instead: one pass over the raw text, strings and comments
 * included, so nothing can hide a row count in any dialect (see strictRowLimit).
 */
const READING_BUDGET = 2_000_000

/**
 * The largest top-level row count (LIMIT, FETCH, TOP) over the SELECT statements of `sql`, in
 * the reading of the dialect that finds the most. Statements that insert, update or delete
 * are never capped; a SELECT without one passes.
 */
export function sqlRowLimit(sql: string, parameters: unknown): SqlLimit {
  // Without one of the words there is no row count to find.
  if (!/limit|fetch|top/i.test(sql)) return { kind: 'none' }
  const params = paramSource(parameters)
  const readings = readingsOf(sql)
  if (sql.length * readings.length > READING_BUDGET) return strictRowLimit(sql, params)
  const param = (i: number) => params.at(i)
  let best: SqlLimit = { kind: 'none' }
  for (const reading of readings) {
    best = larger(best, readingLimit(sql, reading, param))
    if (best.kind === 'invalid') return best
  }
  return best
}

const SP = '[\\s\\u0000\\u0085\\u180e\\u200b-\\u200d\\u2060]'
const COUNT = '([^\\s\\u0000\\u0085\\u180e\\u200b-\\u200d\\u2060,;()]*)'
const STRICT = new RegExp(
  `(?<![\\w$.])(?:(limit)${SP}*${COUNT}(?:${SP}*,${SP}*${COUNT})?|(top)${SP}*\\(?${SP}*([0-9]+)|fetch${SP}+(?:first|next)${SP}+([0-9]+|\\?))(?![\\w$.])`,
  'gi'
)

/**
 * A long statement's strict reading: every LIMIT, TOP and FETCH anywhere in the text counts,
 * whether a dialect would read it as code, a string, a comment or a subquery; a LIMIT not
 * followed by a plain integer is refused; `LIMIT ?` counts as the largest integer parameter.
 * It may refuse a long statement that a server would cap lower; it never passes one that a
 * server of any dialect would not.
 */
export function strictRowLimit(sql: string, params: ParamSource): SqlLimit {
  let maxParam: number | null | undefined
  const paramValue = (): number | string => {
    if (maxParam === undefined) {
      maxParam = null
      params.each((v) => {
        const n = typeof v === 'string' && PLAIN.test(v) ? Number(v) : v
        if (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0)
          maxParam = Math.max(maxParam ?? 0, n)
      })
    }
    return maxParam ?? 'LIMIT ? has no plain non-negative integer among the parameters'
  }
  const value = (v: string): number | string =>
    v === '?'
      ? paramValue()
      : PLAIN.test(v)
        ? Number(v)
        : `LIMIT ${v} is not a plain non-negative integer`
  let best: SqlLimit = { kind: 'none' }
  for (const m of sql.matchAll(STRICT)) {
    const raw = m[1] !== undefined ? (m[3] ?? m[2]!) : m[4] !== undefined ? m[5]! : m[6]!
    const n = value(raw)
    if (typeof n === 'string') return { kind: 'invalid', message: n }
    best = larger(best, { kind: 'count', count: n })
  }
  return best
}
