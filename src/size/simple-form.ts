import { isUtf8 } from 'node:buffer'

// SPEC §4, issue #47: the form the service's own JS client posts for SQL (dtable-web-api's
// querySql, through the form-data package: each part one `Content-Disposition: form-data;
// name="…"` line, then its value) read straight from the held bytes. @fastify/busboy spends
// some 45 µs setting up its streams for a 1 KB form; this reads it in a few. It takes only
// what every multipart reader reads alike, and answers null for anything else, which then goes
// to busboy as before: a preamble, transport padding, an epilogue, any other part header, a
// filename, a name with a quote, a backslash or a byte outside printable ASCII, a value that is
// not UTF-8 or opens with a byte order mark (busboy's decoder drops it), a boundary of
// characters RFC 2046 does not list or written in a content type any other way.

/**
 * The content type as clients write it: one `boundary`, a token or a quoted string without
 * escapes, of RFC 2046's boundary characters (bchars, 1 to 70, the last not a space). Any other
 * way of writing it is left to busboy, whose reading of the parameter is the one used before.
 */
const CONTENT_TYPE =
  /^multipart\/form-data; ?boundary=(?:([0-9A-Za-z'+_\-.]{1,70})|"([0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?])")$/i
/** A part's one header line, as the form-data package writes it (any case, as busboy reads it). */
const DISPOSITION = /^content-disposition: form-data; name="([\x20\x21\x23-\x5b\x5d-\x7e]+)"$/i
const CRLF = Buffer.from('\r\n')

/** The boundary of a content type written as clients write it, or null (busboy reads the form). */
export function simpleFormBoundary(contentType: string): string | null {
  const type = CONTENT_TYPE.exec(contentType)
  return type === null ? null : (type[1] ?? type[2]!)
}

/**
 * A form of more fields is refused unread, as Django refuses one of more than its
 * DATA_UPLOAD_MAX_NUMBER_FIELDS (1,000). The SQL form has two or three. Read whole, a 15 MiB
 * form of 5-byte fields took 330 MiB of memory and one of 300,000 parts 3.3 s of CPU (SPEC §4:
 * what a body holds is its raw bytes, not a parse of them).
 */
export const MAX_FORM_FIELDS = 1000

/** The fields of a plain multipart form, in order, or null when busboy must read it. */
export function simpleFormFields(body: Buffer, boundary: string): [string, string][] | null {
  const delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1')
  // The first delimiter opens the body, without the line end before it.
  const open = delimiter.subarray(2)
  if (body.length < open.length || body.compare(open, 0, open.length, 0, open.length) !== 0)
    return null
  const out: [string, string][] = []
  let i = open.length
  for (;;) {
    if (body[i] === 0x2d && body[i + 1] === 0x2d) {
      // The close delimiter, then nothing or one CRLF.
      const rest = body.length - (i + 2)
      return rest === 0 || (rest === 2 && body[i + 2] === 0x0d && body[i + 3] === 0x0a) ? out : null
    }
    if (body[i] !== 0x0d || body[i + 1] !== 0x0a) return null
    const eol = body.indexOf(CRLF, i + 2)
    if (eol === -1) return null
    const m = DISPOSITION.exec(body.toString('latin1', i + 2, eol))
    if (m === null) return null
    if (body[eol + 2] !== 0x0d || body[eol + 3] !== 0x0a) return null // another header line
    const start = eol + 4
    // From the blank line's CRLF: a value that opens with `--boundary` ends the part at once
    // for busboy, so it is left to it.
    const end = body.indexOf(delimiter, start - 2)
    if (end < start) return null
    const value = body.subarray(start, end)
    if (!isUtf8(value) || (value[0] === 0xef && value[1] === 0xbb && value[2] === 0xbf)) return null
    out.push([m[1]!, value.toString('utf8')])
    // Past the bound, busboy's path reads (and refuses) it.
    if (out.length > MAX_FORM_FIELDS) return null
    i = end + delimiter.length
  }
}
