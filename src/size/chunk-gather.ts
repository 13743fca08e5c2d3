// SPEC §4: the memory a held body takes is its raw bytes. Node hands a body over in the pieces it
// arrived in, each a Buffer of its own (a chunked body's every chunk is copied out of the socket's
// read): a body sent in 1-byte chunks took some 430 bytes of memory for each byte counted, so 2 MiB
// of it held 940 MiB and one client's share could stop the process. Small pieces are copied into
// blocks, so what a body holds stays within a small factor of the bytes counted, however it was cut.

/** A piece this long, with no more memory behind it than twice its bytes, is kept as it came. */
export const KEEP_WHOLE = 4096
/** A first block, and the first after a large piece; each block that fills doubles the next, up to MAX_BLOCK. */
export const MIN_BLOCK = 512
export const MAX_BLOCK = 16 * 1024

/**
 * Gathers the pieces of one body in order into buffers worth keeping: a large piece as it came, or
 * a block of small ones. Every buffer kept is at least half full, so the memory held is at most
 * twice the bytes, in a handful of buffers for each large piece and one for each block.
 */
export class ChunkGather {
  private block: Buffer | null = null
  private fill = 0

  /** Takes one piece; `keep` receives each buffer now complete, in order (none, one or two). */
  add(piece: Buffer, keep: (b: Buffer) => void): void {
    const n = piece.length
    if (n === 0) return
    if (n >= KEEP_WHOLE) {
      this.seal(keep)
      // A view of a larger allocation would hold all of it: such a piece is copied out.
      keep(piece.buffer.byteLength > 2 * n ? copyOf(piece) : piece)
      return
    }
    let block = this.block
    if (block === null || block.length - this.fill < n) {
      // Small pieces keep coming: each block that fills doubles the next.
      const size = block === null ? MIN_BLOCK : Math.min(MAX_BLOCK, block.length * 2)
      this.seal(keep)
      // Its own allocation (not Node's shared pool), so the memory it holds is its own length.
      block = this.block = Buffer.allocUnsafeSlow(Math.max(size, n))
    }
    piece.copy(block, this.fill)
    this.fill += n
  }

  /** Hands over the open block's bytes (if any); the next small piece starts a new block. */
  seal(keep: (b: Buffer) => void): void {
    const block = this.block
    if (block === null) return
    // A block less than half full (the last, or one a large piece ended) gives up its room.
    if (2 * this.fill >= block.length) keep(block.subarray(0, this.fill))
    else if (this.fill > 0) keep(copyOf(block.subarray(0, this.fill)))
    this.block = null
    this.fill = 0
  }
}

/** A copy in an allocation of its own: Node's pool would keep a whole shared slab for it. */
function copyOf(b: Buffer): Buffer {
  const c = Buffer.allocUnsafeSlow(b.length)
  b.copy(c)
  return c
}

/**
 * A streamed body's chunks, the small ones gathered (up to MAX_BLOCK) with those that arrive in
 * the same turn of the loop. Node hands a chunked body over a chunk at a time, each in its own
 * tick, so passed on as they came, a body of 1-byte chunks cost a write to the server for each
 * (7.8 µs of CPU for every 6 bytes the client sent, and the server read them one by one).
 */
export async function* gatherStream(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const it = source[Symbol.asyncIterator]()
  // A read still waiting when the turn ended: the next gather's first.
  let next: Promise<IteratorResult<Buffer>> | null = null
  let done = false
  try {
    for (;;) {
      const first = await (next ?? it.next())
      next = null
      if (first.done === true) return void (done = true)
      if (first.value.length >= KEEP_WHOLE) {
        yield first.value
        continue
      }
      const parts = [first.value]
      let size = first.value.length
      let large: Buffer | null = null
      const turnEnds = new Promise<null>((resolve) => setImmediate(resolve, null))
      while (size < MAX_BLOCK) {
        next = it.next()
        const r = await Promise.race([next, turnEnds])
        if (r === null) break
        next = null
        if (r.done === true) {
          done = true
          break
        }
        if (r.value.length >= KEEP_WHOLE) {
          large = r.value
          break
        }
        parts.push(r.value)
        size += r.value.length
      }
      yield parts.length === 1 ? parts[0]! : Buffer.concat(parts, size)
      if (large !== null) yield large
      if (done) return
    }
  } finally {
    // A reader that stops early stops the source too (a request stream is destroyed); not
    // awaited, as a read may still be waiting on it.
    if (!done) void it.return?.()?.catch(() => {})
  }
}
