// SPEC §6: the path is normalised before it is classified, and the upstream gets exactly the
// normalised path, so what was counted is what is served.

export type NormalizeResult = { ok: true; path: string } | { ok: false; reason: string }

const UNRESERVED = /[A-Za-z0-9\-._~]/
const HEX = /^[0-9A-Fa-f]{2}$/

/** Splits a request target into path and raw query (including its `?`, or ''). */
export function splitTarget(target: string): { path: string; query: string } {
  // Absolute-form targets (`GET http://host/p HTTP/1.1`) carry the path after the authority.
  if (target.charCodeAt(0) !== 47 /* / */) {
    const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(target)
    if (m) target = target.slice(m[0].length) || '/'
  }
  const q = target.indexOf('?')
  return q === -1
    ? { path: target, query: '' }
    : { path: target.slice(0, q), query: target.slice(q) }
}

/** Fast check: a path with none of `%`, `.`, `//`, `\` needs no work. */
function isPlain(path: string): boolean {
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i)
    if (c === 37 /* % */ || c === 46 /* . */ || c === 92 /* \ */ || c === 0) return false
    if (c === 47 && path.charCodeAt(i + 1) === 47) return false
  }
  return true
}

/**
 * The path as a router that drops path parameters reads it (`/dtable-server;a=b/api/…` is
 * `/dtable-server/api/…` to a servlet container): each segment's `;…` removed, then normalised
 * again (`..;` becomes `..`). Classification, size checks and the change history read this;
 * the upstream gets the normalised path as sent, so nothing a server reads is hidden from them.
 * Null when the parameters hide a climb above the root (`/..;/etc`).
 */
export function routeOf(path: string): string | null {
  if (!path.includes(';')) return path
  const segments = path.split('/')
  for (let i = 0; i < segments.length; i++) {
    const semi = segments[i]!.indexOf(';')
    if (semi !== -1) segments[i] = segments[i]!.slice(0, semi)
  }
  const r = normalizePath(segments.join('/'))
  return r.ok ? r.path : null
}

export function normalizePath(raw: string): NormalizeResult {
  if (raw.charCodeAt(0) !== 47) return { ok: false, reason: 'the path must start with /' }
  if (isPlain(raw)) return { ok: true, path: raw }

  // 1. Percent-decoding of unreserved characters only; refuse encoded / and \ and NUL.
  let decoded = ''
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!
    if (ch === '\\') return { ok: false, reason: 'a backslash is not allowed in the path' }
    if (ch === '\0') return { ok: false, reason: 'a NUL is not allowed in the path' }
    if (ch !== '%') {
      decoded += ch
      continue
    }
    const hex = raw.slice(i + 1, i + 3)
    if (!HEX.test(hex)) return { ok: false, reason: 'the path has a malformed percent-encoding' }
    const code = parseInt(hex, 16)
    if (code === 0x2f || code === 0x5c)
      return { ok: false, reason: 'an encoded / or \\ is not allowed in the path' }
    if (code === 0) return { ok: false, reason: 'a NUL is not allowed in the path' }
    const c = String.fromCharCode(code)
    // Upper-case hex for what stays encoded, so one resource has one spelling.
    decoded += UNRESERVED.test(c) ? c : '%' + hex.toUpperCase()
    i += 2
  }

  // 2. Collapse repeated slashes, then 3. remove dot segments (RFC 3986 §5.2.4), refusing
  // any `..` that would climb above the root.
  const segments = decoded.split('/')
  const out: string[] = []
  const last = segments.length - 1
  let trailingSlash = false
  for (let i = 1; i <= last; i++) {
    const seg = segments[i]!
    if (seg === '') {
      if (i === last) trailingSlash = true
      continue
    }
    if (seg === '.') {
      if (i === last) trailingSlash = true
      continue
    }
    if (seg === '..') {
      if (out.length === 0) return { ok: false, reason: 'the path climbs above the root' }
      out.pop()
      if (i === last) trailingSlash = true
      continue
    }
    out.push(seg)
  }
  let path = '/' + out.join('/')
  if (trailingSlash && out.length > 0) path += '/'
  return { ok: true, path }
}
