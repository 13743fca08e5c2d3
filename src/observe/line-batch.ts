import type pino from 'pino'

/** What a batch hands its lines to: pino's SonicBoom destination, or any stream like it. */
export interface LineSink {
  write(chunk: string): unknown
  flush?(cb?: (err?: Error) => void): void
  flushSync?(): void
  end?(): void
}

/**
 * The log's lines of one event-loop turn after its first, handed to the destination as one
 * write (issue #26). SonicBoom measures its last buffer (`Buffer.byteLength`, up to maxWrite
 * bytes) on every write while one is in flight: for a flood's turn of many refusals that costs
 * more than the rest of a refused call's own work. A turn's first line goes straight through
 * (a forwarded call's turn has one or two, and holding those costs more than it saves); the
 * rest wait for the turn's end and go as one write. A batch never passes
 * `maxBytes`, so a worker's writes to the shared stdout stay whole lines of at most PIPE_BUF
 * bytes; lines keep their order. flush() and the process's exit write out what is held.
 */
export class LineBatch implements pino.DestinationStream {
  /** Its length in UTF-16 units is its bytes for ASCII, as nearly every line is (checked on push). */
  private chunk = ''
  private scheduled = false

  constructor(
    private readonly sink: LineSink,
    private readonly maxBytes: number
  ) {
    // Before the sink's own exit hook (registered earlier) writes out what it holds.
    process.prependListener('exit', () => this.push())
  }

  write(line: string): void {
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(this.pushSoon)
      this.sink.write(line)
      return
    }
    if (this.chunk.length > 0 && this.chunk.length + line.length > this.maxBytes) this.push()
    this.chunk += line
  }

  private readonly pushSoon = (): void => {
    this.scheduled = false
    this.push()
  }

  /** Hands what is held to the sink now, in writes of at most maxBytes (whole lines). */
  push(): void {
    if (this.chunk.length === 0) return
    const chunk = this.chunk
    this.chunk = ''
    // Measured once a batch, not once a line (a line's measure cost 0.6 µs).
    if (Buffer.byteLength(chunk) <= this.maxBytes) return void this.sink.write(chunk)
    // Lines with characters of several bytes: the batch goes in pieces of whole lines.
    let piece = ''
    let bytes = 0
    for (const line of chunk.split(/(?<=\n)/)) {
      const n = Buffer.byteLength(line)
      if (bytes > 0 && bytes + n > this.maxBytes) {
        this.sink.write(piece)
        piece = ''
        bytes = 0
      }
      piece += line
      bytes += n
    }
    if (bytes > 0) this.sink.write(piece)
  }

  /** pino's logger.flush(): what is held goes to the sink, and the sink flushes. */
  flush(cb?: (err?: Error) => void): void {
    this.push()
    if (this.sink.flush) this.sink.flush(cb)
    else cb?.()
  }

  flushSync(): void {
    this.push()
    this.sink.flushSync?.()
  }

  end(): void {
    this.push()
    this.sink.end?.()
  }
}
