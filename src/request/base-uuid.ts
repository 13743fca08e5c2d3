import type { ConfigProblem } from '../types.js'
import { isTokenMarker } from './path-tokens.js'

// SPEC §3: a base UUID is 8-4-4-4-12 hex with hyphens, or the same 32 hex digits without,
// in any case; all forms count as one base.

const HEX = '[0-9a-fA-F]'

/**
 * Regex source for one UUID in any accepted form, either case spelled out (so it needs no
 * `i` flag: the JSON Schema uses it as is). The one definition of a base UUID's shape.
 */
export const UUID_PATTERN = `(?:${HEX}{8}-${HEX}{4}-${HEX}{4}-${HEX}{4}-${HEX}{12}|${HEX}{32})`

const UUID_RE = new RegExp(`^${UUID_PATTERN}$`)

/** Of a string UUID_RE accepted: the hyphens at 8, 13, 18 and 23 cut out (no regex per call). */
function canonical(uuid: string): string {
  const hex =
    uuid.length === 32
      ? uuid
      : uuid.slice(0, 8) +
        uuid.slice(9, 13) +
        uuid.slice(14, 18) +
        uuid.slice(19, 23) +
        uuid.slice(24)
  return hex.toLowerCase()
}

/** A base's hyphenated UUID from its canonical form (what operators and clients write). */
export function hyphenated(uuid: string): string {
  return `${uuid.slice(0, 8)}-${uuid.slice(8, 12)}-${uuid.slice(12, 16)}-${uuid.slice(16, 20)}-${uuid.slice(20)}`
}

/**
 * SPEC §7: a key as an operator reads it (log, JSON, CSV, page): `base:` and the hyphenated
 * UUID, so a grep for the UUID a client sent finds it; other keys as they are.
 */
export function shownKey(key: string): string {
  if (key === lastKey) return lastShown
  if (key.length !== 37 || !key.startsWith('base:')) return key
  lastKey = key
  return (lastShown = `base:${hyphenated(key.slice(5))}`)
}
// The last base shown: a flood on one key builds its spelling once, not once a line.
let lastKey = ''
let lastShown = ''

/** The canonical form: lower case, no hyphens; null when `text` is not a UUID. */
export function parseUuid(text: string): string | null {
  return UUID_RE.test(text) ? canonical(text) : null
}

/**
 * SPEC §3: the base is the first path segment that is a UUID, in every API generation
 * (`/api-gateway/api/v2/dtables/{u}/`, `/dtable-server/api/v1/dtables/{u}/`,
 * `/dtable-db/api/v1/query/{u}/`, `/api/v2.1/dtable-db/query/{u}/`, …). Only segments of the
 * two UUID lengths are tested, so the scan costs a few length compares per segment. A token
 * segment (SPEC §6: after `share-links/`, `forms/`, …) is never a base, whatever its shape.
 */
export function baseUuidOfPath(path: string): string | null {
  let start = 1
  let prevStart = 0
  while (start < path.length) {
    let end = path.indexOf('/', start)
    if (end === -1) end = path.length
    const len = end - start
    if (len === 36 || len === 32) {
      const seg = path.slice(start, end)
      if (UUID_RE.test(seg) && !isTokenMarker(path.slice(prevStart, start - 1)))
        return canonical(seg)
    }
    prevStart = start
    start = end + 1
  }
  return null
}

/** Base UUIDs a configuration names, in their canonical form; problems name the entry. */
export function uuids(problems: ConfigProblem[], field: string, list: readonly string[]): string[] {
  // One base written twice (in two spellings: hyphens, case) is a slip, not a plan (issue #39).
  const seen = new Map<string, number>()
  return list.map((b, j) => {
    const uuid = parseUuid(b)
    if (uuid === null)
      problems.push({ field: `${field}[${j}]`, message: `${JSON.stringify(b)} is not a base UUID` })
    else if (seen.has(uuid))
      problems.push({
        field: `${field}[${j}]`,
        message: `${JSON.stringify(b)} is the base of ${field}[${seen.get(uuid)}] again`,
      })
    else seen.set(uuid, j)
    return uuid ?? b
  })
}
