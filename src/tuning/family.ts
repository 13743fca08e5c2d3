import { parseUuid } from '../request/base-uuid.js'

// SPEC §11: a key's calls are kept by route family, so a rule added later (its path, its
// method) can be judged on the calls it would have matched. A family is the method and the
// normalised path with the base UUID as `<u>` and segments that name one record (a row id, a
// number, a long token) as `<id>`: `GET /api-gateway/api/v2/dtables/<u>/rows/<id>/`. A word
// is kept as written only when the service's API uses it, or a rule of the file names it; any
// other word is `<s>` (issue #46: a made-up word per call made a new 35-day store key per
// call), so a key has a bounded number of families whatever paths it invents. Pure.

/**
 * The words of the service's paths (SERVICE.md, its API reference's path families, the change
 * history), lower case. A rule's own words are added per file (familyOf's `words`).
 */
export const SERVICE_WORDS: ReadonlySet<string> = new Set(
  (
    'api-gateway api api2 v1 v2 v2.1 dtables dtable dtable-server dtable-db rows row sql query ' +
    'batch-append-rows batch-update-rows batch-delete-rows filtered-rows links link metadata ' +
    'columns column tables table views view linked-records insert-rows related-users ping ' +
    'server-info auth-token app-access-token access-token external-link-tokens ' +
    'share-link-access-token import-csv append-csv comments comment archive-view socket.io ' +
    'seafhttp media static assets files file upload download upload-links download-links ' +
    'external-links view-external-links share-links invite-links forms form universal-apps ' +
    'external-apps users user account accounts teams team groups group org admin info ' +
    'workspaces workspace apps app plugins plugin automations automation scripts script ' +
    'notifications activities search export import snapshots trash copy duplicate repair ' +
    'big-data base bases row-comments webhooks api-tokens api-token tokens token ' +
    'select-options options lock-rows unlock-rows ddl asset-dir dirs dir thumbnail'
  ).split(/\s+/)
)

/** The series of the calls a key's `ip_ceiling` counts that were keyed on a base (SPEC §3). */
export const CEILING = '* ip_ceiling'

/** SPEC §4: the one family of a class's `others` series (keys not kept by name). */
export const OTHERS_FAMILY = '* others'

/** The longest family kept; a longer path is cut there (its tail as `<…>`). */
const MAX_FAMILY = 160

/** A row id (22 url-safe base64 characters), a number, or a long token with a digit in it. */
function namesOneRecord(segment: string): boolean {
  if (/^\d+$/.test(segment)) return true
  if (segment.length >= 8 && /\d/.test(segment) && /^[A-Za-z0-9_.=~-]+$/.test(segment)) return true
  return /^[A-Za-z0-9_-]{22}$/.test(segment)
}

/** The family of a call (method, normalised path); `words`: a rule's words besides the service's. */
export function familyOf(
  method: string,
  path: string,
  words: ReadonlySet<string> = SERVICE_WORDS
): string {
  const out: string[] = []
  for (const seg of path.split('/')) {
    if (seg === '') out.push('')
    else if (parseUuid(seg) !== null) out.push('<u>')
    else if (namesOneRecord(seg)) out.push('<id>')
    else {
      const word = seg.toLowerCase()
      out.push(words.has(word) || SERVICE_WORDS.has(word) ? word : '<s>')
    }
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
    .replaceAll('<s>', 's')
  return { method, path }
}

/** The words of a file's rules (their paths' literal segments), lower case. */
export function ruleWords(paths: Iterable<string>): Set<string> {
  const out = new Set<string>()
  for (const p of paths)
    for (const seg of p.split('/')) {
      if (seg === '' || seg.includes('{') || seg.includes('*')) continue
      out.add(seg.toLowerCase())
    }
  return out
}
