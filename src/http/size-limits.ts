import type { SizeLimits } from '../types.js'
import { UUID_PATTERN } from './base-uuid.js'
import { sqlRowLimit } from './sql-limit.js'

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

const PLAIN_INT = /^[0-9]+$/

/**
 * list rows: the `limit` query parameter. Only a plain decimal integer (after
 * percent-decoding) is a limit: the server's parser reads `+5000`, ` 5000`, `5_000`, `5000.0`
 * or full-width digits as 5000, so anything else is refused rather than passed uncounted.
 * Repeated: every value must be plain, and the largest counts.
 */
export function countListRows(query: string): Count {
  if (query.length < 2) return { kind: 'none' }
  const values = new URLSearchParams(query.slice(1)).getAll('limit')
  if (values.length === 0) return { kind: 'none' }
  let max = -1
  for (const v of values) {
    if (!PLAIN_INT.test(v)) {
      return {
        kind: 'invalid',
        message: `the query parameter limit=${JSON.stringify(v)} is not a plain non-negative integer`,
      }
    }
    max = Math.max(max, Number(v))
  }
  return { kind: 'count', count: max }
}

/** SQL: the row count of the top-level LIMIT of each SELECT (SPEC §4; see sql-limit.ts). */
export function countSqlRows(body: unknown): Count {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { kind: 'invalid', message: 'the body must be a JSON object with a string "sql"' }
  }
  const { sql, parameters } = body as Record<string, unknown>
  if (typeof sql !== 'string')
    return { kind: 'invalid', message: 'the body must have a string "sql"' }
  const r = sqlRowLimit(sql, parameters)
  return r.kind === 'none' ? { kind: 'none' } : r
}

export function sizeErrorMessage(name: SizeLimitName, count: number, limit: number): string {
  const what = name === 'list_rows' || name === 'sql_list' ? 'rows requested' : 'rows in the body'
  return `${name} is ${limit}: ${count} ${what} is over it`
}
