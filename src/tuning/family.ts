import { parseUuid } from '../request/base-uuid.js'

// SPEC §11: a key's calls are kept by route family, so a rule added later (its path, its
// method) can be judged on the calls it would have matched. A family is the method and the
// normalised path with the base UUID as `<u>` and segments that name one record (a row id, a
// number, a long token) as `<id>`: `GET /api-gateway/api/v2/dtables/<u>/rows/<id>/`. Pure.

/** The series of the calls a key's `ip_ceiling` counts that were keyed on a base (SPEC §3). */
export const CEILING = '* ip_ceiling'

/** The longest family kept; a longer path is cut there (its tail as `<…>`). */
const MAX_FAMILY = 160

/** A row id (22 url-safe base64 characters), a number, or a long token with a digit in it. */
function namesOneRecord(segment: string): boolean {
  if (/^\d+$/.test(segment)) return true
  if (segment.length >= 8 && /\d/.test(segment) && /^[A-Za-z0-9_.=~-]+$/.test(segment)) return true
  return /^[A-Za-z0-9_-]{22}$/.test(segment)
}

/** The family of a call (method, normalised path). */
export function familyOf(method: string, path: string): string {
  const out: string[] = []
  for (const seg of path.split('/')) {
    if (seg === '') out.push('')
    else if (parseUuid(seg) !== null) out.push('<u>')
    else if (namesOneRecord(seg)) out.push('<id>')
    else out.push(seg.toLowerCase())
  }
  const fam = `${method.toUpperCase()} ${out.join('/')}`
  return fam.length <= MAX_FAMILY ? fam : `${fam.slice(0, MAX_FAMILY)}<…>`
}

/**
 * A call of the family, as a classifier reads one: the method and a path with the base's UUID
 * (or a zero UUID when the key is a client's) and `0` for a record's id.
 */
export function callOfFamily(
  family: string,
  uuid: string | null
): { method: string; path: string } {
  const space = family.indexOf(' ')
  const method = family.slice(0, space)
  const path = family
    .slice(space + 1)
    .replace(/<…>$/, '')
    .replaceAll('<u>', uuid ?? '00000000000000000000000000000000')
    .replaceAll('<id>', '0')
  return { method, path }
}
