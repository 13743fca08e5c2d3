import { open, unlink, type FileHandle } from 'node:fs/promises'
import type { IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'

// SPEC §4: a size-checked body is read whole before anything of the call is sent, as nginx
// buffers a request body. Its raw bytes wait in memory while the process's budget
// (size_limits.buffer_bytes) allows; past it they wait in a temporary file, while the bytes in
// temporary files stay under size_limits.spill_bytes; and one client IP holds at most half of
// the two. The file is unlinked the moment it is opened (as nginx does with its
// client_body_temp files), so it is gone on every way out, a SIGKILL included; closing the
// handle frees its space.

/** This process's bounds on held bodies (its share when workers split the file's values). */
export interface HeldLimits {
  /** Bytes in memory, all calls together (size_limits.buffer_bytes). */
  memoryBytes: number
  /** Bytes in temporary files, all calls together (size_limits.spill_bytes). */
  spillBytes: number
  /** Bytes one client holds, in memory and on disk (half of the two). */
  clientBytes: number
}

/**
 * The bytes all checked bodies of this process hold at once. Reserved bytes bound what is let
 * in (an announced length is reserved whole at its head); held bytes are what has arrived
 * (the gauges basegate_body_buffered_bytes and basegate_body_spilled_bytes).
 */
export class BufferBudget {
  private memoryReserved = 0
  private diskReserved = 0
  private readonly clients = new Map<string, number>()
  /** Bytes that arrived and wait in memory now. */
  heldInMemory = 0
  /** Bytes that arrived and wait in temporary files now. */
  heldOnDisk = 0

  /** Bytes reserved in memory. */
  get used(): number {
    return this.memoryReserved
  }
  /** Bytes reserved on disk. */
  get spilled(): number {
    return this.diskReserved
  }
  /** Bytes one client holds (memory and disk). */
  heldBy(client: string): number {
    return this.clients.get(client) ?? 0
  }
  /** Reserves n bytes in memory under `limitBytes`; false when they do not fit. */
  take(n: number, limitBytes: number): boolean {
    if (this.memoryReserved + n > limitBytes) return false
    this.memoryReserved += n
    return true
  }
  give(n: number): void {
    this.memoryReserved -= n
  }
  takeDisk(n: number, limitBytes: number): boolean {
    if (this.diskReserved + n > limitBytes) return false
    this.diskReserved += n
    return true
  }
  giveDisk(n: number): void {
    this.diskReserved -= n
  }
  takeClient(client: string, n: number, limitBytes: number): boolean {
    const held = this.clients.get(client) ?? 0
    if (held + n > limitBytes) return false
    this.clients.set(client, held + n)
    return true
  }
  giveClient(client: string, n: number): void {
    const left = (this.clients.get(client) ?? 0) - n
    if (left > 0) this.clients.set(client, left)
    else this.clients.delete(client)
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

/** Which bound a body would pass: the process's memory and disk together, or its client's half. */
export type HeldBound = 'spill_bytes' | 'client'

class Holder implements HeldBody {
  length = 0
  private mem: Buffer[] = []
  /** Bytes of `mem` (held in memory now). */
  private memBytes = 0
  private file: FileHandle | null = null
  /** Set at the first chunk that did not fit in memory: from then on every chunk goes to the file. */
  private spilling = false
  private writing: Promise<unknown> = Promise.resolve()
  private released = false
  /** This body's reservations in the budget. */
  private memoryReserved = 0
  private diskReserved = 0
  private clientReserved = 0
  /** An announced length was reserved whole at the head: chunks take nothing more. */
  private fixed = false

  constructor(
    private readonly budget: BufferBudget,
    private readonly limits: HeldLimits,
    private readonly client: string,
    private readonly dir: string
  ) {}

  get spilled(): boolean {
    return this.spilling
  }

  /**
   * SPEC §4: an announced length is reserved whole at the head, in memory when it fits, else
   * on disk; null when it fits, else the bound it would pass (answered 503 before a byte is read).
   */
  reserve(length: number): HeldBound | null {
    if (!this.budget.takeClient(this.client, length, this.limits.clientBytes)) return 'client'
    this.clientReserved = length
    if (this.budget.take(length, this.limits.memoryBytes)) this.memoryReserved = length
    else if (this.budget.takeDisk(length, this.limits.spillBytes)) {
      this.diskReserved = length
      this.spilling = true
    } else {
      this.budget.giveClient(this.client, length)
      this.clientReserved = 0
      return 'spill_bytes'
    }
    this.fixed = true
    return null
  }

  /**
   * Takes one chunk: null when it is held in memory, a promise when it waits for the disk (the
   * reader pauses until then), or the bound it would pass (nothing of it is held).
   */
  add(chunk: Buffer): Promise<void> | null | HeldBound {
    const n = chunk.length
    if (!this.fixed) {
      if (!this.budget.takeClient(this.client, n, this.limits.clientBytes)) return 'client'
      this.clientReserved += n
      if (!this.spilling && this.budget.take(n, this.limits.memoryBytes)) this.memoryReserved += n
      else if (this.budget.takeDisk(this.memoryReserved + n, this.limits.spillBytes)) {
        // What waited in memory moves to the file with this chunk.
        this.diskReserved += this.memoryReserved + n
        this.budget.give(this.memoryReserved)
        this.memoryReserved = 0
        this.spilling = true
      } else {
        this.budget.giveClient(this.client, n)
        this.clientReserved -= n
        return 'spill_bytes'
      }
    }
    this.length += n
    if (!this.spilling) {
      this.mem.push(chunk)
      this.memBytes += n
      this.budget.heldInMemory += n
      return null
    }
    // Writes run one after another; after a failure every later one fails too.
    const write = this.writing.then(async () => {
      const fh = await this.ensureFile()
      if (this.mem.length > 0) {
        // What waited in memory goes first.
        const held = this.mem
        this.mem = []
        for (const c of held) await writeAll(fh, c)
        this.budget.heldInMemory -= this.memBytes
        this.budget.heldOnDisk += this.memBytes
        this.diskBytes += this.memBytes
        this.memBytes = 0
      }
      await writeAll(fh, chunk)
      this.budget.heldOnDisk += n
      this.diskBytes += n
    })
    this.writing = write
    return write
  }

  /** Bytes written to the file (held on disk now). */
  private diskBytes = 0

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

  /** Frees the reservations and the memory at once; the file closes when its writes settle. */
  async release(): Promise<void> {
    if (this.released) return
    this.released = true
    const b = this.budget
    b.give(this.memoryReserved)
    b.giveDisk(this.diskReserved)
    b.giveClient(this.client, this.clientReserved)
    this.memoryReserved = this.diskReserved = this.clientReserved = 0
    b.heldInMemory -= this.memBytes
    this.memBytes = 0
    this.mem = []
    await this.writing.catch(() => {})
    b.heldOnDisk -= this.diskBytes
    this.diskBytes = 0
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
  /** Holding it would pass a bound: at the head (an announced length) or at the byte that passes it. */
  | { kind: 'full'; bound: HeldBound; atHead: boolean }
  /** Not received whole within `timeoutMs`: what was held is freed. */
  | { kind: 'timeout' }
  | { kind: 'aborted' }
  /** The temporary file could not be written (disk full, directory not writable). */
  | { kind: 'failed'; error: Error }

export interface ReadOptions {
  maxBytes: number
  budget: BufferBudget
  limits: HeldLimits
  /** Who holds the bytes (SPEC §6's client, IPv6 by its prefix): one client holds at most its half. */
  client: string
  /** How long the body may take from now (size_limits.body_timeout_ms less what the head took). */
  timeoutMs: number
  /** Where spilled bodies go; the OS's temporary directory by default. */
  dir?: string
  /** Every check the head allows has passed: the body is about to be read (100 Continue). */
  onHeadPassed?: () => void
  /** Sees each chunk before it is held; false stops the read. */
  onChunk?: (chunk: Buffer) => boolean
  /** Sets the body's timer (the injected clock's); returns its cancel. */
  setTimer: (fn: () => void, ms: number) => () => void
}

/**
 * Reads a request body whole (up to `maxBytes`) into a HeldBody. A declared length over the
 * cap is refused before a byte is read, as is one that would pass a held-body bound; a
 * chunked body stops being read at the cap or at the byte that passes a bound.
 */
export function readHeldBody(req: IncomingMessage, opts: ReadOptions): Promise<BodyRead> {
  const holder = new Holder(opts.budget, opts.limits, opts.client, opts.dir ?? tmpdir())
  const declared = req.headers['content-length']
  if (declared !== undefined) {
    const length = Number(declared)
    if (length > opts.maxBytes) return Promise.resolve({ kind: 'too_large', body: holder })
    const bound = holder.reserve(length)
    if (bound !== null) return Promise.resolve({ kind: 'full', bound, atHead: true })
  }
  opts.onHeadPassed?.()
  return new Promise((resolve) => {
    let over = false
    let finished = false
    const done = (r: BodyRead) => {
      if (finished) return
      finished = true
      cancelTimer()
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('aborted', onError)
      if (r.kind !== 'whole' && r.kind !== 'stopped' && r.kind !== 'too_large')
        void holder.release()
      resolve(r)
    }
    const cancelTimer = opts.setTimer(() => {
      req.pause()
      done({ kind: 'timeout' })
    }, opts.timeoutMs)
    const fail = (error: Error) => {
      req.pause()
      done({ kind: 'failed', error })
    }
    const onData = (c: Buffer) => {
      if (holder.length + c.length > opts.maxBytes) over = true
      const go = over || opts.onChunk === undefined || opts.onChunk(c)
      const wait = holder.add(c)
      if (typeof wait === 'string') {
        req.pause()
        return done({ kind: 'full', bound: wait, atHead: false })
      }
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
