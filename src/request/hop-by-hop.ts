// RFC 9110 §7.6.1: headers that describe one connection, never forwarded by a proxy, plus
// Proxy-Connection (non-standard, still sent by old clients) and Expect (Node's server has
// already answered 100-continue; undici refuses to send it).
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
])

/** The header names a `Connection` header lists, lower-cased; those are hop-by-hop too. */
export function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null
  // Nearly every message says one of its own options, which name no header: an upstream's
  // `keep-alive`, a client's `keep-alive` or `close` (skips the split, the Set and its strings).
  if (typeof value === 'string' && value.length <= 10) {
    const v = value.toLowerCase()
    if (v === 'keep-alive' || v === 'close') return null
  }
  const text = Array.isArray(value) ? value.join(',') : value
  const out = new Set<string>()
  for (const t of text.split(',')) {
    const name = t.trim().toLowerCase()
    if (name !== '' && name !== 'close' && name !== 'keep-alive') out.add(name)
  }
  return out.size > 0 ? out : null
}
