import { memo2 } from '../request/memo.js'
import type { SizeLimits } from '../types.js'
import { UUID_PATTERN } from '../request/base-uuid.js'

// SPEC §4's action table: a size limit is a limit on an action (list, append, update, delete
// rows; list with SQL), held on every path by which a client of any API generation reaches
// that action on the server. Pure: compiled once, read per request.

export type SizeLimitName = 'list_rows' | 'append_rows' | 'update_rows' | 'delete_rows' | 'sql_list'

/** What a checked call counts: the query's `limit`, a body array's length, or a body's SQL. */
export type SizeCheck =
  | { name: 'list_rows'; counts: 'query' }
  | { name: 'append_rows' | 'update_rows' | 'delete_rows'; counts: 'array'; field: string }
  | { name: 'sql_list'; counts: 'sql' }

/** A check that reads the body (every one but the list's `limit` query). */
export type BodyCheck = Exclude<SizeCheck, { counts: 'query' }>

const U = UUID_PATTERN
/** `/api/v1/dtables/{u}/…` is served under both names: the pre-5.3 server, and the gateway of 5.3+. */
const V1 = `/(?:dtable-server|api-gateway)/api/v1/dtables/${U}`
const V2 = `/api-gateway/api/v2/dtables/${U}`

interface Action {
  method: string
  /** Whole-path patterns (trailing `/` optional), matched ASCII case-insensitively. */
  paths: readonly string[]
  check: SizeCheck
}

const ACTIONS: readonly Action[] = [
  {
    method: 'GET',
    paths: [`${V2}/rows`, `${V1}/rows`],
    check: { name: 'list_rows', counts: 'query' },
  },
  {
    method: 'POST',
    paths: [`${V2}/rows`, `${V1}/batch-append-rows`],
    check: { name: 'append_rows', counts: 'array', field: 'rows' },
  },
  {
    method: 'PUT',
    paths: [`${V2}/rows`, `${V1}/batch-update-rows`],
    check: { name: 'update_rows', counts: 'array', field: 'updates' },
  },
  {
    method: 'DELETE',
    paths: [`${V2}/rows`, `${V1}/batch-delete-rows`],
    check: { name: 'delete_rows', counts: 'array', field: 'row_ids' },
  },
  {
    method: 'POST',
    paths: [
      `${V2}/sql`,
      `/dtable-db/api/v1/query/${U}`,
      `/api-gateway/api/v1/query/${U}`,
      `/api/v2\\.1/dtable-db/query/${U}`,
    ],
    check: { name: 'sql_list', counts: 'sql' },
  },
]

/** Per method, one regex of every path of its actions, and the check of each alternative. */
const BY_METHOD = new Map<string, { re: RegExp; checks: SizeCheck[] }>()
for (const method of new Set(ACTIONS.map((a) => a.method))) {
  const alts: string[] = []
  const checks: SizeCheck[] = []
  for (const a of ACTIONS.filter((x) => x.method === method)) {
    for (const p of a.paths) {
      alts.push(`(${p}/?)`)
      checks.push(a.check)
    }
  }
  BY_METHOD.set(method, { re: new RegExp(`^(?:${alts.join('|')})$`, 'i'), checks })
}

/** The check that applies to (method, normalised path), or null: everything else streams. */
export const sizeCheckFor = memo2(8192, checkOf)

function checkOf(method: string, path: string): SizeCheck | null {
  const m = BY_METHOD.get(method)
  if (m === undefined) return null
  // A cheap filter before the regex: every checked path ends in `rows` or `/sql`, or is a
  // `/query/{uuid}` (lower-cased once, trailing `/` dropped).
  const t = (path.endsWith('/') ? path.slice(0, -1) : path).toLowerCase()
  if (!t.endsWith('rows') && !t.endsWith('/sql') && !t.includes('/query/')) return null
  const hit = m.re.exec(path)
  if (hit === null) return null
  for (let i = 1; i < hit.length; i++) if (hit[i] !== undefined) return m.checks[i - 1]!
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
