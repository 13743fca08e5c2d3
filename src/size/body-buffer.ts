import type { FileHandle } from 'node:fs/promises'
import type { IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { BodyPace, type SetTimer } from './body-pace.js'
import { ChunkGather } from './chunk-gather.js'
import { openUnlinkedTemp } from './temp-file.js'
import { bodyTurns, type TurnShare } from './turn-share.js'

// SPEC §4: a size-checked body is read whole before anything of the call is sent, as nginx
// buffers a request body. Its raw bytes wait in memory while the process's budget
// (size_limits.buffer_bytes) allows; past it they wait in a temporary file, while the bytes in
// temporary files stay under size_limits.spill_bytes. Bytes are counted as they arrive, never
// reserved by an announced length: a head alone holds nothing. One client IP holds at most its
// share (size_limits.client_share) of the two, and the last max_body_bytes of buffer_bytes are
// kept for clients that hold nothing, so a newcomer always finds room for one body. The file is
// unlinked the moment it is opened (as nginx does with its client_body_temp files), so it is
// gone on every way out, a SIGKILL included; closing the handle frees its space.

/** This process's bounds on held bodies (its share when workers split the file's values). */
export interface HeldLimits {
  /** Bytes in memory, all calls together (size_limits.buffer_bytes). */
  memoryBytes: number
  /** Bytes in temporary files, all calls together (size_limits.spill_bytes). */
  spillBytes: number
  /** Bytes one client holds, in memory and on disk (client_share of the two). */
  clientBytes: number
  /** The part of memoryBytes only a client that held nothing when its body began may use. */
  reserveBytes: number
}

/**
 * The bytes all held bodies of this process hold now, counted as they arrive (the gauges
 * basegate_body_buffered_bytes and basegate_body_spilled_bytes read them).
 */
export class BufferBudget {
  /** Bytes that arrived and wait in memory now. */
  inMemory = 0
  /** Bytes that arrived and wait in (or are being written to) temporary files now. */
  onDisk = 0
  private readonly clients = new Map<string, number>()

  /** Bytes one client holds (memory and disk). */
  heldBy(client: string): number {
    return this.clients.get(client) ?? 0
  }
  /** What one client may still send under its share. */
  clientRoom(client: string, limits: HeldLimits): number {
    return Math.max(0, limits.clientBytes - this.heldBy(client))
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
  /** Takes n bytes of memory under `limitBytes`; false when they do not fit. */
  takeMemory(n: number, limitBytes: number): boolean {
    if (this.inMemory + n > limitBytes) return false
    this.inMemory += n
    return true
  }
  takeDisk(n: number, limitBytes: number): boolean {
    if (this.onDisk + n > limitBytes) return false
    this.onDisk += n
    return true
  }
  /** Everything one holder took, given back at once (a held body's or answer's release). */
  giveAll(client: string, memory: number, disk: number): void {
    this.inMemory -= memory
    this.onDisk -= disk
    this.giveClient(client, memory + disk)
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

/**
 * Which bound a body would pass: its client's share, or the process's memory and disk together
 * (`memory` for a body that may not spill: an unchecked one read before forwarding).
 */
export type HeldBound = 'client_share' | 'spill_bytes' | 'memory'

export interface HolderOptions {
  /** Never to a temporary file: a chunk that does not fit in memory is refused ('memory'). */
  memoryOnly?: boolean
}

class Holder implements HeldBody {
  length = 0
  /** The body in memory; once it spills, what waits for the file. */
  private mem: Buffer[] = []
  /** Small pieces copied into blocks, kept in memory or waiting for the file alike. */
  private readonly gather = new ChunkGather()
  private readonly keepInMemory = (b: Buffer): void => void this.mem.push(b)
  private file: FileHandle | null = null
  /** Set at the first chunk that did not fit in memory: from then on every chunk goes to the file. */
  private spilling = false
  private writing: Promise<unknown> = Promise.resolve()
  private released = false
  /** This body's bytes in the budget's memory count, disk count and its client's count. */
  private memoryTaken = 0
  private diskTaken = 0
  /** The client held nothing when this body began: it may use the kept part of memory. */
  private readonly fresh: boolean

  constructor(
    private readonly budget: BufferBudget,
    private readonly limits: HeldLimits,
    private readonly client: string,
    private readonly dir: string,
    private readonly opts: HolderOptions = {}
  ) {
    this.fresh = budget.heldBy(client) === 0
  }

  get spilled(): boolean {
    return this.spilling
  }

  /**
   * Takes one chunk as it arrives: null when it is held in memory, a promise when it waits for
   * the disk (the reader pauses until then), or the bound it would pass (nothing of it is held).
   * Memory first (less the part kept for newcomers), then the disk, then, for a client that
   * held nothing, the kept part.
   */
  add(chunk: Buffer): Promise<void> | null | HeldBound {
    const n = chunk.length
    const { budget, limits } = this
    if (!budget.takeClient(this.client, n, limits.clientBytes)) return 'client_share'
    const shared = limits.memoryBytes - limits.reserveBytes
    if (!this.spilling && budget.takeMemory(n, shared)) this.memoryTaken += n
    else if (
      !this.spilling &&
      this.opts.memoryOnly !== true &&
      budget.takeDisk(this.memoryTaken + n, limits.spillBytes)
    ) {
      // What waited in memory moves to the file with this chunk.
      budget.inMemory -= this.memoryTaken
      this.diskTaken += this.memoryTaken + n
      this.memoryTaken = 0
      this.spilling = true
    } else if (this.spilling && budget.takeDisk(n, limits.spillBytes)) this.diskTaken += n
    else if (!this.spilling && this.fresh && budget.takeMemory(n, limits.memoryBytes))
      this.memoryTaken += n
    else {
      budget.giveClient(this.client, n)
      return this.opts.memoryOnly === true ? 'memory' : 'spill_bytes'
    }
    this.length += n
    this.gather.add(chunk, this.keepInMemory)
    // Spilling, the list is what waits for the file; a small piece waits in its block (at most
    // MAX_BLOCK bytes) for the next write.
    return !this.spilling || this.mem.length === 0 ? null : this.writeOut()
  }

  /** Writes the list (what waited in memory, then what came since), after the writes before. */
  private writeOut(): Promise<void> {
    // Writes run one after another; after a failure every later one fails too.
    const write = this.writing.then(async () => {
      const fh = await this.ensureFile()
      const held = this.mem
      this.mem = []
      for (const c of held) await writeAll(fh, c)
    })
    this.writing = write
    return write
  }

  /** Every byte taken is in memory's list or written (or the first failure). */
  settled(): Promise<unknown> {
    this.gather.seal(this.keepInMemory)
    if (this.spilling && this.mem.length > 0) void this.writeOut().catch(() => {})
    return this.writing
  }

  private opening: Promise<FileHandle> | null = null
  private ensureFile(): Promise<FileHandle> {
    this.opening ??= openUnlinkedTemp(this.dir, 'body').then((fh) => (this.file = fh))
    return this.opening
  }

  chunks(): Iterable<Buffer> | AsyncIterable<Buffer> {
    void this.settled()
    if (!this.spilling) return this.mem
    return this.fileChunks()
  }

  private async *fileChunks(): AsyncGenerator<Buffer> {
    await this.writing
    yield* readRange(this.file!, 0, this.length)
  }

  async slice(start: number, end: number): Promise<Buffer> {
    await this.settled()
    if (this.spilling) {
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

  /** Frees the memory and the counts at once; the file closes when its writes settle. */
  async release(): Promise<void> {
    if (this.released) return
    this.released = true
    this.budget.giveAll(this.client, this.memoryTaken, this.diskTaken)
    this.memoryTaken = this.diskTaken = 0
    this.mem = []
    this.gather.seal(() => {})
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
  /**
   * Over `maxBytes`: what was read, and the rest still in the request stream; `pace`, on a
   * read ahead, the body's watch, still running (the rest keeps the average from its first byte).
   */
  | { kind: 'too_large'; body: HeldBody; pace?: BodyPace }
  /** Holding it would pass a bound: at the head (an announced length) or at the byte that passes it. */
  | { kind: 'full'; bound: HeldBound; atHead: boolean }
  /**
   * A read told to stream what it cannot hold (`overflow: 'stream'`) met a bound: what was held,
   * the chunk that did not fit, and the rest still in the request stream (streamed on).
   */
  | { kind: 'unheld'; body: HeldBody; pending?: Buffer }
  /** Not received whole within `timeoutMs`: what was held is freed. */
  | { kind: 'timeout' }
  /** SPEC §4 min_body_rate: a window of the body carried too few bytes; what was held is freed. */
  | { kind: 'too_slow' }
  | { kind: 'aborted' }
  /** The temporary file could not be written (disk full, directory not writable). */
  | { kind: 'failed'; error: Error }

export interface ReadOptions {
  maxBytes: number
  budget: BufferBudget
  limits: HeldLimits
  /** Who holds the bytes (SPEC §6's client, IPv6 by its prefix): one client holds at most its share. */
  client: string
  /** How long the body may take from now (size_limits.body_timeout_ms less what the head took); null: no bound. */
  timeoutMs: number | null
  /** At a bound: refuse the body (a checked one: 503), or stream what cannot be held. */
  overflow?: 'refuse' | 'stream'
  /** SPEC §4 size_limits.min_body_rate (bytes per second; 0: no floor). */
  minBodyRate: number
  /** Where spilled bodies go; the OS's temporary directory by default. */
  dir?: string
  /** Memory only (an unchecked body read before forwarding): never a temporary file. */
  memoryOnly?: boolean
  /** Every check the head allows has passed: the body is about to be read (100 Continue). */
  onHeadPassed?: () => void
  /** Sees each chunk before it is held; false stops the read. */
  onChunk?: (chunk: Buffer) => boolean
  /**
   * SPEC §4 a read ahead (an unchecked upload): the first `maxBytes` are read whatever the length
   * announced (a longer body is not refused: its rest streams on, its watch with it).
   */
  readAhead?: boolean
  /** Sets the body's timer (the injected clock's); returns its cancel. */
  setTimer: SetTimer
  /** The injected clock's monotonic time (the pace's held time). */
  now?: () => number
  /** The bytes a turn of the loop reads of bodies (the process's share by default). */
  turns?: TurnShare
}

/** What an announced length decides before a byte is read; null: read on. */
function headRead(req: IncomingMessage, opts: ReadOptions, holder: Holder): BodyRead | null {
  const declared = req.headers['content-length']
  if (declared === undefined) return null
  // A read ahead holds at most maxBytes of a longer body (the rest streams on).
  const length =
    opts.readAhead === true ? Math.min(Number(declared), opts.maxBytes) : Number(declared)
  if (length > opts.maxBytes) return { kind: 'too_large', body: holder }
  // SPEC §4: a length past what this client may still hold is refused before a byte is read
  // (nothing is reserved: a head alone holds nothing).
  if (length <= opts.budget.clientRoom(opts.client, opts.limits)) return null
  return opts.overflow === 'stream'
    ? { kind: 'unheld', body: holder }
    : { kind: 'full', bound: 'client_share', atHead: true }
}

/**
 * A read ahead's watch, handed to the rest of the body: until the forward reads on, the time is
 * not the client's (held), and nothing answers for it here.
 */
function handedOver(pace: BodyPace): BodyPace {
  pace.hold(true)
  pace.onSlow = () => {}
  return pace
}

/**
 * Why a body's read is paused: the holder (a chunk on its way to disk), or the turn's share of
 * body bytes spent (SPEC §4, turn-share.ts). It reads on when neither waits, unless it ended.
 */
class ReadPauses {
  private holding = false
  private turnSpent = false
  constructor(
    private readonly req: IncomingMessage,
    private readonly turns: TurnShare,
    private readonly ended: () => boolean
  ) {}

  holdFor(wait: Promise<void>, fail: (e: Error) => void): void {
    this.holding = true
    this.req.pause()
    wait.then(() => {
      this.holding = false
      this.readOn()
    }, fail)
  }

  /** Counts a chunk read in this turn; past the turn's share, the read waits for the next. */
  took(bytes: number): void {
    if (this.turns.take(bytes) || this.turnSpent) return
    this.turnSpent = true
    this.req.pause()
    this.turns.next(this.nextTurn)
  }

  private readonly nextTurn = (): void => {
    this.turnSpent = false
    this.readOn()
  }

  private readOn(): void {
    if (!this.ended() && !this.holding && !this.turnSpent) this.req.resume()
  }
}

/**
 * Reads a request body whole (up to `maxBytes`) into a HeldBody. A declared length over the
 * cap is refused before a byte is read, as is one past what its client may still hold; every
 * other bound is met at the byte that passes it (a chunked body stops being read there).
 */
export function readHeldBody(req: IncomingMessage, opts: ReadOptions): Promise<BodyRead> {
  const holder = new Holder(opts.budget, opts.limits, opts.client, opts.dir ?? tmpdir(), {
    memoryOnly: opts.memoryOnly,
  })
  const atHead = headRead(req, opts, holder)
  if (atHead !== null) return Promise.resolve(atHead)
  opts.onHeadPassed?.()
  return new Promise((resolve) => {
    let over = false
    let finished = false
    const done = (r: BodyRead) => {
      if (finished) return
      finished = true
      cancelTimer()
      // A read ahead hands its watch to the rest of the body; every other end stops it.
      if (r.kind === 'too_large' && opts.readAhead === true) r.pace = handedOver(pace)
      else pace.stop()
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('aborted', onError)
      const keeps = r.kind === 'whole' || r.kind === 'stopped' || r.kind === 'too_large'
      if (!keeps && r.kind !== 'unheld') void holder.release()
      resolve(r)
    }
    const cancelTimer =
      opts.timeoutMs === null
        ? () => {}
        : opts.setTimer(() => {
            req.pause()
            done({ kind: 'timeout' })
          }, opts.timeoutMs)
    const pace = new BodyPace(
      opts.minBodyRate,
      opts.setTimer,
      () => {
        req.pause()
        done({ kind: 'too_slow' })
      },
      opts.now
    )
    const fail = (error: Error) => {
      req.pause()
      done({ kind: 'failed', error })
    }
    const pauses = new ReadPauses(req, opts.turns ?? bodyTurns, () => finished)
    const onData = (c: Buffer) => {
      pace.add(c.length)
      if (holder.length + c.length > opts.maxBytes) over = true
      const go = over || opts.onChunk === undefined || opts.onChunk(c)
      const wait = holder.add(c)
      if (typeof wait === 'string') {
        req.pause()
        if (opts.overflow === 'stream') return done({ kind: 'unheld', body: holder, pending: c })
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
      if (wait !== null) pauses.holdFor(wait, fail)
      pauses.took(c.length)
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

/**
 * The body as received: what was held, a chunk read but not held, then the rest of the request
 * stream (dry-run past the cap; an unchecked body memory could not hold).
 */
export async function* heldThenRest(
  body: HeldBody,
  req: IncomingMessage,
  pending?: Buffer
): AsyncGenerator<Buffer> {
  yield* body.chunks()
  if (pending !== undefined) yield pending
  req.resume()
  for await (const c of req) yield c as Buffer
}
