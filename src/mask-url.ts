// Secrets never reach a log or an admin answer (SPEC §6, §7): URLs are shown without them.

const MASK = '****'

/** A URL with its password (and user) hidden: redis://:secret@host → redis://****@host. */
export function maskUrl(url: string): string {
  if (url === '') return url
  try {
    const u = new URL(url)
    if (u.password === '' && u.username === '') return url
    u.username = MASK
    u.password = ''
    return u.toString()
  } catch {
    return MASK
  }
}

export { MASK }
