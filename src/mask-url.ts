// Secrets never reach a log or an admin answer (SPEC §6, §7): URLs are shown without them.

const MASK = '****'

/**
 * Query parameters named like a secret (SPEC §7): ioredis reads `password` (and `pass`,
 * `username`) from the query as well as from the user info (issue #39 item 5), and an upstream
 * URL may carry `?key=` or `?api_key=` (issue #46). Any name that is, or contains, one of these
 * words is masked: masking one parameter too many costs nothing, one too few leaks a secret.
 */
const SECRET_PARAMS =
  /^(pass|passwd|pwd|user|username|sig)$|password|secret|token|key|auth|credential|signature/i

/**
 * A URL with its secrets hidden: the user info (redis://:secret@host → redis://****@host) and
 * any query parameter that carries one (redis://host/?password=secret → ?password=****).
 */
export function maskUrl(url: string): string {
  if (url === '') return url
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return MASK
  }
  let changed = false
  if (u.password !== '' || u.username !== '') {
    u.username = MASK
    u.password = ''
    changed = true
  }
  for (const key of [...u.searchParams.keys()]) {
    if (!SECRET_PARAMS.test(key)) continue
    u.searchParams.set(key, MASK)
    changed = true
  }
  return changed ? u.toString() : url
}

export { MASK }
