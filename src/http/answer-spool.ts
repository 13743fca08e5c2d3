import type { FileHandle } from 'node:fs/promises'
import type { BufferBudget, HeldLimits } from '../size/body-buffer.js'
import { openUnlinkedTemp } from '../size/temp-file.js'

// SPEC §4 "Answers": a client that reads slowly holds bytes, not a server connection. What the
// server sends while the client is not taking it waits here: in memory up to
// upstream.buffer_response_bytes for this answer, then in a temporary file (unlinked at once, as
// nginx's proxy_temp files are), each byte counted as it arrives in the held-body budget shared
// with request bodies (memory, spill_bytes, the client's share). Past those bounds add() says
// no, and the answer streams at the client's pace (the server connection waits). A queue:
// bytes leave from the front as the client takes them, and their counts go with them.

const READ_CHUNK = 64 * 1024

export class AnswerSpool {
  private mem: Buffer[] = []
  private memBytes = 0
  /** The temporary file, once the answer passed its memory: bytes [readAt, writeAt) wait there. */
  private file: Promise<FileHandle> | null = null
  private writeAt = 0
  private readAt = 0
  private writing: Promise<unknown> = Promise.resolve()
  /** This answer's bytes in the budget's memory and disk counts (and its client's). */
  private memoryTaken = 0
  private diskTaken = 0
  private released = false

  constructor(
    private readonly budget: BufferBudget,
    private readonly limits: HeldLimits,
    /** upstream.buffer_response_bytes: this answer's memory. */
    private readonly answerMemory: number,
    private readonly client: string,
    private readonly dir: string
  ) {}

  /** Bytes waiting for the client. */
  get pending(): number {
    return this.memBytes + (this.writeAt - this.readAt)
  }

  /** Whether a temporary file holds part of the answer. */
  get spilled(): boolean {
    return this.file !== null
  }

  /**
   * Holds a chunk the client cannot take yet: true when it is held (memory, or the file once
   * the answer passed its memory), false when holding it would pass a bound (nothing held).
   */
  add(chunk: Buffer): boolean {
    if (this.released) return false
    const n = chunk.length
    const { budget, limits } = this
    if (!budget.takeClient(this.client, n, limits.clientBytes)) return false
    // Memory while this answer's part and the shared memory (less the newcomers' part) allow.
    if (
      this.file === null &&
      this.memBytes + n <= this.answerMemory &&
      budget.takeMemory(n, limits.memoryBytes - limits.reserveBytes)
    ) {
      this.memoryTaken += n
      this.mem.push(chunk)
      this.memBytes += n
      return true
    }
    if (!budget.takeDisk(n, limits.spillBytes)) {
      budget.giveClient(this.client, n)
      return false
    }
    this.diskTaken += n
    const at = this.writeAt
    this.writeAt += n
    // The file is made now (synchronously named): from here on every byte goes after it.
    const file = this.ensureFile()
    this.writing = this.writing.then(async () => {
      const fh = await file
      let done = 0
      while (done < n) {
        const { bytesWritten } = await fh.write(chunk, done, n - done, at + done)
        done += bytesWritten
      }
    })
    return true
  }

  /**
   * The next bytes for the client, oldest first (memory first: a file only ever holds what came
   * after it); null when nothing waits. Their counts are freed as they are handed over.
   */
  async take(): Promise<Buffer | null> {
    if (this.mem.length > 0) {
      const c = this.mem.shift()!
      this.memBytes -= c.length
      this.freeMemory(c.length)
      return c
    }
    if (this.readAt >= this.writeAt || this.file === null) return null
    await this.writing
    const fh = await this.file
    const want = Math.min(READ_CHUNK, this.writeAt - this.readAt)
    const buf = Buffer.allocUnsafe(want)
    const { bytesRead } = await fh.read(buf, 0, want, this.readAt)
    if (bytesRead === 0) throw new Error('the held answer ended early')
    this.readAt += bytesRead
    this.freeDisk(bytesRead)
    return bytesRead === want ? buf : buf.subarray(0, bytesRead)
  }

  private freeMemory(n: number): void {
    if (this.released) return
    this.budget.giveAll(this.client, n, 0)
    this.memoryTaken -= n
  }

  private freeDisk(n: number): void {
    if (this.released) return
    this.budget.giveAll(this.client, 0, n)
    this.diskTaken -= n
  }

  private ensureFile(): Promise<FileHandle> {
    this.file ??= openUnlinkedTemp(this.dir, 'answer')
    return this.file
  }

  /** Frees what is held (the counts at once, the file when its writes settle); idempotent. */
  release(): void {
    if (this.released) return
    this.released = true
    this.budget.giveAll(this.client, this.memoryTaken, this.diskTaken)
    this.memoryTaken = this.diskTaken = 0
    this.mem = []
    this.memBytes = 0
    const file = this.file
    if (file === null) return
    void this.writing
      .catch(() => {})
      .then(() => file)
      .then(
        (fh) => fh.close().catch(() => {}),
        () => {}
      )
  }
}
