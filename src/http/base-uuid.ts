import { isTokenMarker } from './path-tokens.js'

// SPEC §3: a base UUID is 8-4-4-4-12 hex with hyphens, or the same 32 hex digits without,
// in any case; all forms count as one base.

const UUID_RE = /^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$/i
const UUID_SRC = '(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})'

/** Regex source for one UUID segment in any accepted form (for rule patterns). */
export const UUID_PATTERN = UUID_SRC

function canonical(uuid: string): string {
  return uuid.replace(/-/g, '').toLowerCase()
}

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
