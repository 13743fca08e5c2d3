// SPEC §3: a base UUID is 8-4-4-4-12 hex with hyphens, or the same 32 hex digits without,
// in any case; all forms count as one base.

const UUID_RE = /^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$/i
const UUID_SRC = '(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})'

/** Regex source for one UUID segment in any accepted form (for rule patterns). */
export const UUID_PATTERN = UUID_SRC

// A `dtables` segment followed by a whole UUID segment, anywhere in the path.
const DTABLES_RE = new RegExp(`/dtables/(${UUID_SRC})(?=/|$)`, 'i')

/** The canonical form: lower case, no hyphens; null when `text` is not a UUID. */
export function parseUuid(text: string): string | null {
  return UUID_RE.test(text) ? canonical(text) : null
}

function canonical(uuid: string): string {
  return uuid.replace(/-/g, '').toLowerCase()
}

/** The canonical UUID of the base a path addresses, or null. */
export function baseUuidOfPath(path: string): string | null {
  const m = DTABLES_RE.exec(path)
  return m ? canonical(m[1]!) : null
}
