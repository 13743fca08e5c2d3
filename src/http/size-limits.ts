import sqlParser from 'node-sql-parser/build/mysql.js'
import type { SizeLimits } from '../types.js'
import { UUID_PATTERN } from './base-uuid.js'

// SPEC §4 size table: which endpoints are checked and what is counted there. Pure: the
// gateway reads the body (only on these endpoints) and hands it here.

export type SizeLimitName = 'list_rows' | 'append_rows' | 'update_rows' | 'delete_rows' | 'sql_list'

const ROWS_RE = new RegExp(`^/api-gateway/api/v2/dtables/${UUID_PATTERN}/rows/?$`, 'i')
const SQL_RE = new RegExp(`^/api-gateway/api/v2/dtables/${UUID_PATTERN}/sql/?$`, 'i')

const ROWS_BY_METHOD: Record<string, { name: SizeLimitName; field: string } | undefined> = {
  POST: { name: 'append_rows', field: 'rows' },
  PUT: { name: 'update_rows', field: 'updates' },
  DELETE: { name: 'delete_rows', field: 'row_ids' },
}

export interface SizeCheck {
  name: SizeLimitName
  /** The body array to count (rows endpoints), or null (list rows: the query; SQL: `sql`). */
  field: string | null
  /** Whether the body must be read to count. */
  needsBody: boolean
}

/** The check that applies to (method, normalised path), or null: everything else streams. */
export function sizeCheckFor(method: string, path: string): SizeCheck | null {
  // Cheap reject first: every checked path ends in /rows or /sql.
  const tail = path.endsWith('/') ? path.slice(-5, -1) : path.slice(-4)
  const lower = tail.toLowerCase()
  if (lower === 'rows') {
    if (!ROWS_RE.test(path)) return null
    if (method === 'GET') return { name: 'list_rows', field: null, needsBody: false }
    const m = ROWS_BY_METHOD[method]
    return m ? { name: m.name, field: m.field, needsBody: true } : null
  }
  if (lower.endsWith('sql') && method === 'POST' && SQL_RE.test(path))
    return { name: 'sql_list', field: null, needsBody: true }
  return null
}

export function limitFor(name: SizeLimitName, limits: SizeLimits): number {
  switch (name) {
    case 'list_rows':
      return limits.listRows
    case 'append_rows':
      return limits.appendRows
    case 'update_rows':
      return limits.updateRows
    case 'delete_rows':
      return limits.deleteRows
    case 'sql_list':
      return limits.sqlList
  }
}

/** What counting found: a number to compare, nothing to count, or a body that is not what the endpoint takes. */
export type Count =
  | { kind: 'count'; count: number }
  | { kind: 'none'; note?: string }
  | { kind: 'invalid'; message: string }

/**
 * list rows: the `limit` query parameter. A missing or non-numeric `limit` is not counted
 * (the server applies its own default, or refuses it). Repeated: the largest counts.
 */
export function countListRows(query: string): Count {
  if (query.length < 2) return { kind: 'none' }
  const params = new URLSearchParams(query.slice(1))
  let max = -1
  for (const v of params.getAll('limit')) {
    if (/^\s*\d+\s*$/.test(v)) max = Math.max(max, Number(v))
  }
  return max < 0 ? { kind: 'none' } : { kind: 'count', count: max }
}

/** append/update/delete: the length of the body's array field. */
export function countBodyArray(body: unknown, field: string): Count {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { kind: 'invalid', message: `the body must be a JSON object with an array "${field}"` }
  }
  const value = (body as Record<string, unknown>)[field]
  if (!Array.isArray(value))
    return { kind: 'invalid', message: `the body must have an array "${field}"` }
  return { kind: 'count', count: value.length }
}

const parser = new sqlParser.Parser()

interface LimitNode {
  seperator: string
  value: { type: string; value: unknown }[]
}
interface SelectNode {
  type: string
  limit?: LimitNode | null
  _next?: SelectNode
  parentheses_symbol?: boolean
}

/** The LIMIT that applies to a whole statement (for a UNION chain, the one after the last part). */
function outerLimit(stmt: SelectNode): LimitNode | null {
  let last = stmt
  while (last._next) last = last._next
  if (last !== stmt && last.parentheses_symbol) return null
  return last.limit ?? null
}

/**
 * SQL: the row count of the top-level LIMIT of each SELECT. `LIMIT n`, `LIMIT n OFFSET m`
 * and `LIMIT m, n` count n. A `?` is read from `parameters`: the LIMIT is the last clause,
 * so its placeholders are the last parameters. INSERT/UPDATE/DELETE are never capped; SQL
 * the parser cannot read is not counted (the server judges it).
 */
export function countSqlRows(body: unknown): Count {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { kind: 'invalid', message: 'the body must be a JSON object with a string "sql"' }
  }
  const sql = (body as Record<string, unknown>).sql
  if (typeof sql !== 'string')
    return { kind: 'invalid', message: 'the body must have a string "sql"' }
  // Without the word there is no LIMIT to count: skip the parse (~0.3 ms).
  if (!/limit/i.test(sql)) return { kind: 'none' }
  let ast: SelectNode | SelectNode[]
  try {
    ast = parser.astify(sql, { database: 'MySQL' }) as unknown as SelectNode | SelectNode[]
  } catch (err) {
    return { kind: 'none', note: `unparsable SQL: ${(err as Error).message.slice(0, 200)}` }
  }
  const statements = Array.isArray(ast) ? ast : [ast]
  const params = (body as Record<string, unknown>).parameters
  let max = -1
  for (const stmt of statements) {
    if (stmt.type !== 'select') continue
    const limit = outerLimit(stmt)
    if (!limit || limit.value.length === 0) continue
    // `LIMIT m, n` counts its second value; `LIMIT n OFFSET m` and `LIMIT n` the first.
    const index = limit.seperator === ',' ? 1 : 0
    const node = limit.value[index]
    if (!node) continue
    let n: number | null = null
    if (node.type === 'number' && typeof node.value === 'number') n = node.value
    else if (
      node.type === 'origin' &&
      node.value === '?' &&
      statements.length === 1 &&
      Array.isArray(params)
    ) {
      const fromEnd = limit.value.length - index
      const p = params[params.length - fromEnd]
      if (typeof p === 'number' && Number.isInteger(p)) n = p
      else if (typeof p === 'string' && /^\d+$/.test(p)) n = Number(p)
    }
    if (n !== null) max = Math.max(max, n)
  }
  return max < 0 ? { kind: 'none' } : { kind: 'count', count: max }
}

export function sizeErrorMessage(name: SizeLimitName, count: number, limit: number): string {
  const what = name === 'list_rows' || name === 'sql_list' ? 'rows requested' : 'rows in the body'
  return `${name} is ${limit}: ${count} ${what} is over it`
}
