import { partRefusal, type EncodingRefusal } from './encoding.js'

// SPEC §4 "Body encodings" inside a multipart body: every part's own headers, read from the raw
// bytes as RFC 2046 frames them (a delimiter is CRLF, `--`, the boundary, at a line start; the
// first one may open the body), so a part busboy reads without telling (its transfer encoding,
// a `name*=`) is seen. Streaming: it keeps a delimiter's length of bytes between chunks and one
// part's headers at a time.

/** A part's headers may be this long at the most (busboy and Django stop near here too). */
const MAX_HEADER_BYTES = 64 * 1024
const CRLF = Buffer.from('\r\n')
const HEADERS_END = Buffer.from('\r\n\r\n')

type State = 'delimiter' | 'after_delimiter' | 'headers' | 'done'

export class PartHeaderScanner {
  private readonly delimiter: Buffer
  private state: State = 'delimiter'
  /** Bytes not yet judged: at most a delimiter's length while searching, one header block else. */
  private pending: Buffer
  /** The first problem found; the rest is not read. */
  refusal: EncodingRefusal | null = null

  constructor(boundary: string) {
    this.delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1')
    // The first delimiter may open the body: read as if a line ended just before it.
    this.pending = Buffer.from(CRLF)
  }

  write(chunk: Buffer): void {
    if (this.state === 'done') return
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    this.run()
  }

  private run(): void {
    for (;;) {
      if (this.state === 'delimiter') {
        const at = this.pending.indexOf(this.delimiter)
        if (at === -1) {
          // Keep what could be the start of a delimiter cut by the chunk's end.
          const keep = Math.min(this.pending.length, this.delimiter.length - 1)
          this.pending = this.pending.subarray(this.pending.length - keep)
          return
        }
        this.pending = this.pending.subarray(at + this.delimiter.length)
        this.state = 'after_delimiter'
      } else if (this.state === 'after_delimiter') {
        // `--` closes the body; else the rest of the line (transport padding) ends at CRLF.
        if (this.pending.length < 2) return
        if (this.pending[0] === 0x2d && this.pending[1] === 0x2d) {
          this.state = 'done'
          return
        }
        const eol = this.pending.indexOf(CRLF)
        if (eol === -1) return this.guard()
        this.pending = this.pending.subarray(eol + 2)
        this.state = 'headers'
      } else if (this.state === 'headers') {
        // A part with no headers at all: the blank line comes at once.
        const blank = this.pending[0] === 0x0d && this.pending[1] === 0x0a
        const end = blank ? -2 : this.pending.indexOf(HEADERS_END)
        if (end === -1) return this.guard()
        if (!blank) this.judge(this.pending.subarray(0, end).toString('latin1'))
        if (this.refusal !== null) {
          this.state = 'done'
          return
        }
        // The part's body begins after the blank line; the next delimiter's CRLF ends it.
        this.pending = this.pending.subarray(blank ? 2 : end + 4)
        this.state = 'delimiter'
      } else return
    }
  }

  /** A header block (or a padding line) that never ends is refused, not held without bound. */
  private guard(): void {
    if (this.pending.length <= MAX_HEADER_BYTES) return
    this.refusal = {
      status: 400,
      message: `a multipart part's headers are over ${MAX_HEADER_BYTES} bytes`,
    }
    this.state = 'done'
  }

  private judge(block: string): void {
    const headers: [string, string][] = []
    for (const line of block.split('\r\n')) {
      // A folded line (obs-fold) continues the header before it.
      if ((line.startsWith(' ') || line.startsWith('\t')) && headers.length > 0) {
        headers[headers.length - 1]![1] += ' ' + line.trim()
        continue
      }
      const colon = line.indexOf(':')
      if (colon === -1) continue
      headers.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()])
    }
    this.refusal = partRefusal(headers)
  }
}
