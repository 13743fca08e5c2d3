import type { IncomingHttpHeaders } from 'node:http'

// SPEC §4 "Body encodings": a checked body is read as the server would read it, or refused. The
// counters read UTF-8 (US-ASCII is a subset) with no content coding, and a multipart body by one
// boundary; anything else could carry a row count the counters cannot see (`+AEw-IMIT 50000`
// is `LIMIT 50000` in UTF-7), so it is refused before a byte of the body is read. Pure.

/** An encoding refusal: 415 for a charset or content coding, 400 for a malformed form. */
export interface EncodingRefusal {
  status: 400 | 415
  message: string
}

const READABLE_CHARSETS = new Set(['utf-8', 'us-ascii'])

/** The headers that frame or type a body; servers disagree on which of two counts. */
const BODY_HEADERS = ['content-type', 'content-encoding', 'content-length', 'transfer-encoding']

/**
 * SPEC §4: a checked call with more than one Content-Type, Content-Encoding, Content-Length or
 * Transfer-Encoding header is refused (400 naming it): Node keeps the first Content-Type,
 * gunicorn and Django the last, so the counters could read another body than the server.
 */
export function duplicateBodyHeader(raw: readonly string[]): EncodingRefusal | null {
  let seen = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!
    if (name.length < 12 || name.length > 17) continue
    const at = BODY_HEADERS.indexOf(name.toLowerCase())
    if (at === -1) continue
    if ((seen & (1 << at)) !== 0)
      return {
        status: 400,
        message: `the request has more than one ${['Content-Type', 'Content-Encoding', 'Content-Length', 'Transfer-Encoding'][at]} header; send one`,
      }
    seen |= 1 << at
  }
  return null
}

/** One `name=value` parameter of a header (RFC 9110 §5.6.6), value unquoted; names lower-cased. */
export interface HeaderParam {
  name: string
  value: string
}

/**
 * The parameters after a header's first `;`, with quoted strings read as one value (a `;` inside
 * quotes does not split). Malformed pieces are kept with what they say, never dropped: a reader
 * that skipped one could miss a second `boundary`.
 */
export function headerParams(header: string): HeaderParam[] {
  const out: HeaderParam[] = []
  let i = header.indexOf(';')
  if (i === -1) return out
  const n = header.length
  while (i < n) {
    i++ // past ';'
    const eq = indexOfEither(header, i, '=', ';')
    if (eq === -1 || header[eq] === ';') {
      const name = header
        .slice(i, eq === -1 ? n : eq)
        .trim()
        .toLowerCase()
      if (name !== '') out.push({ name, value: '' })
      i = eq === -1 ? n : eq
      continue
    }
    const name = header.slice(i, eq).trim().toLowerCase()
    let j = eq + 1
    while (j < n && (header[j] === ' ' || header[j] === '\t')) j++
    let value: string
    if (header[j] === '"') {
      let v = ''
      j++
      while (j < n && header[j] !== '"') {
        if (header[j] === '\\' && j + 1 < n) j++
        v += header[j]
        j++
      }
      value = v
      const semi = header.indexOf(';', j)
      j = semi === -1 ? n : semi
    } else {
      const semi = header.indexOf(';', j)
      value = header.slice(j, semi === -1 ? n : semi).trim()
      j = semi === -1 ? n : semi
    }
    out.push({ name, value })
    i = j
  }
  return out
}

function indexOfEither(s: string, from: number, a: string, b: string): number {
  for (let i = from; i < s.length; i++) if (s[i] === a || s[i] === b) return i
  return -1
}

/** A charset the counters read, or the refusal naming it. */
export function charsetRefusal(
  params: readonly HeaderParam[],
  where: string
): EncodingRefusal | null {
  for (const p of params) {
    if (p.name !== 'charset' && p.name !== 'charset*') continue
    if (p.name === 'charset' && READABLE_CHARSETS.has(p.value.toLowerCase())) continue
    return {
      status: 415,
      message: `${where} charset ${JSON.stringify(p.value)} is not read here; send utf-8`,
    }
  }
  return null
}

/**
 * What the head says of a checked body's encoding: its Content-Encoding, its content type's
 * charset and, for multipart, its boundary. Null when the body can be read as the server reads it.
 */
export function headEncodingRefusal(headers: IncomingHttpHeaders): EncodingRefusal | null {
  const coding = headers['content-encoding']
  if (coding !== undefined) {
    for (const c of coding.split(',')) {
      const token = c.trim().toLowerCase()
      if (token !== 'identity' && token !== '')
        return {
          status: 415,
          message: `the body's Content-Encoding ${JSON.stringify(c.trim())} is not read here; send it as identity`,
        }
    }
  }
  const type = headers['content-type']
  if (type === undefined) return null
  const params = headerParams(type)
  const charset = charsetRefusal(params, "the body's")
  if (charset !== null) return charset
  if (type.trim().toLowerCase().startsWith('multipart/')) {
    const boundaries = params.filter((p) => p.name === 'boundary' || p.name === 'boundary*').length
    if (boundaries > 1)
      return {
        status: 400,
        message: `the multipart content type has ${boundaries} boundary parameters; send one`,
      }
  }
  return null
}

const PLAIN_TRANSFER = new Set(['7bit', '8bit', 'binary'])

/**
 * One multipart part's headers (lower-cased names): a transfer encoding other than 7bit, 8bit or
 * binary, a name given as `name*=` (RFC 2231/5987: servers differ on whether it replaces
 * `name`), two names, or a charset the counters do not read. Null when the part reads plainly.
 */
export function partRefusal(headers: readonly [string, string][]): EncodingRefusal | null {
  for (const [name, value] of headers) {
    if (name === 'content-transfer-encoding') {
      const te = value.trim().toLowerCase()
      if (!PLAIN_TRANSFER.has(te))
        return {
          status: 400,
          message: `a multipart part has Content-Transfer-Encoding ${JSON.stringify(value.trim())}; only 7bit, 8bit and binary are read`,
        }
    } else if (name === 'content-disposition') {
      const params = headerParams(value)
      if (params.some((p) => p.name.startsWith('name*')))
        return {
          status: 400,
          message: 'a multipart part is named with name*=; name it with name="…"',
        }
      if (params.filter((p) => p.name === 'name').length > 1)
        return { status: 400, message: 'a multipart part has two name parameters; send one' }
    } else if (name === 'content-type') {
      const r = charsetRefusal(headerParams(value), "a multipart part's")
      if (r !== null) return r
    }
  }
  return null
}
