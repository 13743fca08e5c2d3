// Secrets never reach a log or an admin answer (SPEC §6, §7): URLs are shown without them.

const MASK = '****'

/**
 * Query parameters that carry a secret in a store URL: ioredis reads `password` (and `pass`,
 * `username`) from the query as well as from the user info (issue #39 item 5: a Redis
 * password given as `?password=` showed in the log, /v1/config and /v1/status).
 */
const SECRET_PARAMS = /^(password|pass|passwd|pwd|secret|token|auth|username|user)$/i

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
