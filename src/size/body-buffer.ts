import { open, unlink, type FileHandle } from 'node:fs/promises'
import type { IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'

// SPEC §4: a size-checked body is read whole before anything of the call is sent, as nginx
// buffers a request body. Its raw bytes wait in memory while the process's budget
// (size_limits.buffer_bytes) allows; past it they wait in a temporary file. The file is
// unlinked the moment it is opened (as nginx does with its client_body_temp files), so it is
// gone on every way out, a SIGKILL included; closing the handle frees its space.

/** The bytes all checked bodies of this process hold in memory at once. */
export class BufferBudget {
  private usedBytes = 0
  get used(): number {
    return this.usedBytes
  }
  /** Reserves n bytes under `limitBytes`; false when they do not fit. */
  take(n: number, limitBytes: number): boolean {
    if (this.usedBytes + n > limitBytes) return false
    this.usedBytes += n
    return true
  }
  give(n: number): void {
    this.usedBytes -= n
  }
}

/** A body held whole: in memory or in an unlinked temporary file. */
export interface HeldBody {
  readonly length: number
  readonly spilled: boolean
  /** The bytes to forward, chunk by chunk (an iterable keeps the client's framing). */
  chunks(): Iterable<Buffer> | AsyncIterable<Buffer>
  /** Bytes [start, end) of the body. */
  slice(start: number, end: number): Promise<Buffer>
  /** Frees the memory or the file; safe to call more than once. */
  release(): Promise<void>
}

const READ_CHUNK = 64 * 1024

class Holder implements HeldBody {
  length = 0
  private mem: Buffer[] = []
  private memBytes = 0
  private file: FileHandle | null = null
  /** Set at the first chunk that did not fit: from then on every chunk goes to the file. */
  private spilling = false
  private writing: Promise<unknown> = Promise.resolve()
  private released = false

  constructor(
    private readonly budget: BufferBudget,
    private readonly limitBytes: number,
    private readonly dir: string
  ) {}

  get spilled(): boolean {
    return this.spilling
  }

  /** Takes one chunk; a promise when it waits for the disk (the reader pauses until then). */
  add(chunk: Buffer): Promise<void> | null {
    this.length += chunk.length
    if (!this.spilling && this.budget.take(chunk.length, this.limitBytes)) {
      this.mem.push(chunk)
      this.memBytes += chunk.length
      return null
    }
    this.spilling = true
    // Writes run one after another; after a failure every later one fails too.
    const write = this.writing.then(async () => {
      const fh = await this.ensureFile()
      if (this.mem.length > 0) {
        // What waited in memory goes first, and its share of the budget goes back.
        const held = this.mem
        this.mem = []
        for (const c of held) await writeAll(fh, c)
        this.budget.give(this.memBytes)
        this.memBytes = 0
      }
      await writeAll(fh, chunk)
    })
    this.writing = write
    return write
  }

  /** Every write done (or the first failure). */
  settled(): Promise<unknown> {
    return this.writing
  }

  private opening: Promise<FileHandle> | null = null
  private ensureFile(): Promise<FileHandle> {
    this.opening ??= (async () => {
      const path = join(this.dir, `basegate-body-${process.pid}-${randomBytes(8).toString('hex')}`)
      const fh = await open(path, 'wx+', 0o600)
      this.file = fh
      try {
        await unlink(path)
      } catch (err) {
        await fh.close().catch(() => {})
        throw err
      }
      return fh
    })()
    return this.opening
  }

  chunks(): Iterable<Buffer> | AsyncIterable<Buffer> {
    if (!this.spilling) return this.mem
    return readRange(this.file!, 0, this.length)
  }

  async slice(start: number, end: number): Promise<Buffer> {
    if (this.spilling) {
      await this.writing
      const out = Buffer.alloc(end - start)
      let at = 0
      while (at < out.length) {
        const { bytesRead } = await this.file!.read(out, at, out.length - at, start + at)
        if (bytesRead === 0) break
        at += bytesRead
      }
      return out.subarray(0, at)
    }
    const out: Buffer[] = []
    let pos = 0
    for (const c of this.mem) {
      const from = Math.max(start - pos, 0)
      const to = Math.min(end - pos, c.length)
      if (from < to) out.push(c.subarray(from, to))
      pos += c.length
      if (pos >= end) break
    }
    return out.length === 1 ? out[0]! : Buffer.concat(out)
  }

  async release(): Promise<void> {
    if (this.released) return
    this.released = true
    this.budget.give(this.memBytes)
    this.memBytes = 0
    this.mem = []
    await this.writing.catch(() => {})
    const fh = this.opening === null ? null : await this.opening.catch(() => null)
    await fh?.close().catch(() => {})
  }
}

async function writeAll(fh: FileHandle, chunk: Buffer): Promise<void> {
  let at = 0
  while (at < chunk.length) {
    const { bytesWritten } = await fh.write(chunk, at, chunk.length - at)
    at += bytesWritten
  }
}

async function* readRange(fh: FileHandle, start: number, end: number): AsyncGenerator<Buffer> {
  for (let pos = start; pos < end;) {
    const buf = Buffer.allocUnsafe(Math.min(READ_CHUNK, end - pos))
    const { bytesRead } = await fh.read(buf, 0, buf.length, pos)
    if (bytesRead === 0) throw new Error('the held body ended early')
    yield bytesRead === buf.length ? buf : buf.subarray(0, bytesRead)
    pos += bytesRead
  }
}

export type BodyRead =
  | { kind: 'whole'; body: HeldBody }
  /** `onChunk` asked to stop: the rest is left unread (the connection is to close). */
  | { kind: 'stopped'; body: HeldBody }
  /** Over `maxBytes`: what was read, and the rest still in the request stream. */
  | { kind: 'too_large'; body: HeldBody }
  | { kind: 'aborted' }
  /** The temporary file could not be written (disk full, directory not writable). */
  | { kind: 'failed'; error: Error }

export interface ReadOptions {
  maxBytes: number
  budget: BufferBudget
  limitBytes: number
  /** Where spilled bodies go; the OS's temporary directory by default. */
  dir?: string
  /** Sees each chunk before it is held; false stops the read. */
  onChunk?: (chunk: Buffer) => boolean
}

/**
 * Reads a request body whole (up to `maxBytes`) into a HeldBody. A declared length over the
 * cap is refused before a byte is read; a chunked body stops being read at the cap.
 */
export function readHeldBody(req: IncomingMessage, opts: ReadOptions): Promise<BodyRead> {
  const holder = new Holder(opts.budget, opts.limitBytes, opts.dir ?? tmpdir())
  const declared = req.headers['content-length']
  if (declared !== undefined && Number(declared) > opts.maxBytes)
    return Promise.resolve({ kind: 'too_large', body: holder })
  return new Promise((resolve) => {
    let over = false
    let finished = false
    const done = (r: BodyRead) => {
      if (finished) return
      finished = true
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('aborted', onError)
      if (r.kind === 'aborted' || r.kind === 'failed') void holder.release()
      resolve(r)
    }
    const fail = (error: Error) => {
      req.pause()
      done({ kind: 'failed', error })
    }
    const onData = (c: Buffer) => {
      if (holder.length + c.length > opts.maxBytes) over = true
      const go = over || opts.onChunk === undefined || opts.onChunk(c)
      const wait = holder.add(c)
      if (!go || over) {
        req.pause()
        const r: BodyRead = over
          ? { kind: 'too_large', body: holder }
          : { kind: 'stopped', body: holder }
        if (wait === null) return done(r)
        return void wait.then(() => done(r), fail)
      }
      if (wait !== null) {
        req.pause()
        wait.then(() => req.resume(), fail)
      }
    }
    const onEnd = () =>
      void holder.settled().then(() => done({ kind: 'whole', body: holder }), fail)
    const onError = () => done({ kind: 'aborted' })
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('aborted', onError)
  })
}

/** The body as received: what was held, then the rest of the request stream (dry-run past the cap). */
export async function* heldThenRest(body: HeldBody, req: IncomingMessage): AsyncGenerator<Buffer> {
  yield* body.chunks()
  req.resume()
  for await (const c of req) yield c as Buffer
}
