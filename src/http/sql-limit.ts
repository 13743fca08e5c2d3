// SPEC §4: the row count of a SELECT's top-level LIMIT, found from the statement's tokens
// (strings, quoted identifiers, comments, parentheses, separators) and from no SQL dialect's
// grammar, so that the service's own SQL (`HAS ANY OF`, `ILIKE`, `OFFSET m LIMIT n`, its
// functions) can never hide a LIMIT from the check.

type Tok =
  | { t: 'word'; v: string }
  | { t: 'str' }
  | { t: 'ident' }
  | { t: 'open' }
  | { t: 'close' }
  | { t: 'semi' }
  | { t: 'comma' }
  | { t: 'param'; index: number }
  | { t: 'punct'; v: string }

/** JS white space as \s knows it (so a non-breaking space never glues a number to LIMIT). */
function isSpace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d)
  if (c < 0xa0) return false
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

const SINGLE: Record<number, Tok> = {
  0x28: { t: 'open' },
  0x29: { t: 'close' },
  0x3b: { t: 'semi' },
  0x2c: { t: 'comma' },
}

/** Splits SQL into tokens, skipping white space and comments. Never throws: an unclosed string runs to the end. */
export function tokenize(sql: string): Tok[] {
  const out: Tok[] = []
  let params = 0
  let i = 0
  const n = sql.length
  while (i < n) {
    const c = sql.charCodeAt(i)
    if (isSpace(c)) {
      i++
    } else if ((c === 0x2d && sql.charCodeAt(i + 1) === 0x2d) || c === 0x23) {
      i = lineEnd(sql, i) // -- or #
    } else if (c === 0x2f && sql.charCodeAt(i + 1) === 0x2a) {
      const end = sql.indexOf('*/', i + 2)
      i = end === -1 ? n : end + 2
    } else if (c === 0x27 || c === 0x22) {
      i = quotedEnd(sql, i, sql[i]!, true)
      out.push({ t: 'str' })
    } else if (c === 0x60) {
      i = quotedEnd(sql, i, '`', false)
      out.push({ t: 'ident' })
    } else if (SINGLE[c] !== undefined) {
      out.push(SINGLE[c]!)
      i++
    } else if (c === 0x3f) {
      out.push({ t: 'param', index: params++ })
      i++
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
  return out
}

function lineEnd(sql: string, i: number): number {
  const end = sql.indexOf('\n', i)
  return end === -1 ? sql.length : end + 1
}

/** The index past a quoted run: a doubled quote is one quote; in strings a backslash escapes. */
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

/** A statement's depth-0 tokens, and its kind (the first word, however deep in parentheses). */
function statements(tokens: Tok[]): { first: string; top: Tok[] }[] {
  const out: { first: string; top: Tok[] }[] = []
  let cur: { first: string; top: Tok[] } = { first: '', top: [] }
  let depth = 0
  for (const tok of tokens) {
    if (tok.t === 'semi' && depth === 0) {
      out.push(cur)
      cur = { first: '', top: [] }
      continue
    }
    if (cur.first === '' && tok.t === 'word') cur.first = tok.v.toLowerCase()
    if (tok.t === 'open') depth++
    else if (tok.t === 'close') depth = Math.max(0, depth - 1)
    else if (depth === 0) cur.top.push(tok)
  }
  out.push(cur)
  return out
}

/** The value of one row-count token: a plain non-negative integer, or `?` from parameters. */
function rowCount(tok: Tok | undefined, parameters: unknown): number | string {
  if (tok === undefined) return 'LIMIT has no row count'
  if (tok.t === 'word') {
    if (PLAIN.test(tok.v)) return Number(tok.v)
    return `LIMIT ${tok.v} is not a plain non-negative integer`
  }
  if (tok.t === 'param') {
    const p = Array.isArray(parameters) ? parameters[tok.index] : undefined
    if (typeof p === 'number' && Number.isSafeInteger(p) && p >= 0) return p
    if (typeof p === 'string' && PLAIN.test(p)) return Number(p)
    return `LIMIT ? takes parameter ${tok.index + 1}, which is not a plain non-negative integer (${JSON.stringify(p ?? null)})`
  }
  return 'LIMIT is followed by something that is not a plain non-negative integer'
}

/** The row count of one statement's last top-level LIMIT (after a UNION, the one for the whole). */
function limitOf(top: Tok[], parameters: unknown): SqlLimit {
  let at = -1
  for (let i = top.length - 1; i >= 0; i--) {
    const tok = top[i]!
    if (tok.t === 'word' && tok.v.toLowerCase() === 'limit') {
      at = i
      break
    }
  }
  if (at === -1) return { kind: 'none' }
  let countTok = top[at + 1]
  let next = at + 2
  // `LIMIT m, n` counts n; `LIMIT n OFFSET m` and `LIMIT n` count n.
  if (top[at + 2]?.t === 'comma') {
    countTok = top[at + 3]
    next = at + 4
  } else if (
    top[at + 2]?.t === 'word' &&
    (top[at + 2] as { v: string }).v.toLowerCase() === 'offset'
  ) {
    next = at + 4
  }
  const count = rowCount(countTok, parameters)
  if (typeof count === 'string') return { kind: 'invalid', message: count }
  const after = top[next]
  if (after?.t === 'punct' && ARITHMETIC.has(after.v)) {
    return { kind: 'invalid', message: 'LIMIT is an expression, not a plain non-negative integer' }
  }
  return { kind: 'count', count }
}

/**
 * The largest top-level LIMIT row count over the SELECT statements of `sql`. Statements that
 * insert, update or delete are never capped; a SELECT without LIMIT passes.
 */
export function sqlRowLimit(sql: string, parameters: unknown): SqlLimit {
  // Without the word there is no LIMIT to count.
  if (!/limit/i.test(sql)) return { kind: 'none' }
  let max = -1
  for (const st of statements(tokenize(sql))) {
    if (!SELECTS.has(st.first)) continue
    const r = limitOf(st.top, parameters)
    if (r.kind === 'invalid') return r
    if (r.kind === 'count' && r.count > max) max = r.count
  }
  return max < 0 ? { kind: 'none' } : { kind: 'count', count: max }
}
