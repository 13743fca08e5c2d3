import pino, { type Logger } from 'pino'
import { fstatSync } from 'node:fs'
import { Socket } from 'node:net'
import { LineBatch, type LineSink } from './line-batch.js'
import { systemClock } from '../clock.js'

export type { Logger }

/**
 * pino JSON on stdout. No secret can reach a log because no log call is given one: the
 * request line is built field by field (method, path without query, class, key, limits,
 * status, timings), never from headers or bodies. pino's redaction is not used: with
 * wildcard paths it cost ~8 % of the gateway's CPU per request (cpu profile, issue #2).
 * `time` is epoch milliseconds (pino's default; `jq '.time/1000|todate'` reads it).
 */
export function createLogger(
  opts: { level?: string; destination?: pino.DestinationStream; worker?: number } = {}
): Logger {
  const worker = opts.worker !== undefined
  const sink = opts.destination === undefined ? stdoutSink(worker) : null
  const logger = pino(
    {
      level: opts.level ?? 'info',
      base:
        opts.worker === undefined
          ? { service: 'basegate' }
          : { service: 'basegate', worker: opts.worker },
      formatters: { level: (label) => ({ level: label }) },
    },
    opts.destination ?? stdoutLines(worker, sink!)
  )
  if (sink !== null) sayDrops(logger, sink)
  return logger
}

/** A sink that drops what passes its bound and says how many lines it dropped once caught up. */
export abstract class DroppingSink implements LineSink {
  private dropped = 0
  /** Told, once the reader catches up, how many lines it lost (createLogger logs it). */
  onDropped: (lines: number) => void = () => {}
  abstract readonly maxQueued: number
  abstract write(chunk: string): unknown

  /** A batch not written: its lines are counted. */
  protected drop(chunk: string): void {
    for (let i = chunk.indexOf('\n'); i !== -1; i = chunk.indexOf('\n', i + 1)) this.dropped++
  }

  /** The reader caught up: what it lost is said, once. */
  protected readonly caughtUp = (): void => {
    if (this.dropped === 0) return
    const n = this.dropped
    this.dropped = 0
    this.onDropped(n)
  }
}

/** What a reader that fell behind lost, said through the logger once it catches up. */
export function sayDrops(logger: Logger, pipe: DroppingSink): void {
  pipe.onDropped = (n) =>
    logger.warn(
      { dropped_lines: n },
      `log lines dropped: the log's reader fell ${pipe.maxQueued} bytes behind`
    )
}

const PIPE_BUF = 4096
/** SonicBoom's own largest write. */
const MAX_WRITE = 16 * 1024

/**
 * stdout, asynchronously, a few milliseconds of lines at a time (line-batch.ts). To a pipe or a socket (a
 * container's log, journald, a log shipper), a libuv stream on fd 1: its writes are made on the
 * loop's own thread and never block it (a reader that falls behind leaves them queued in the
 * stream); SonicBoom's asynchronous writes went through the thread pool, a hand-off and a
 * wake-up per write (issue #47 measured it at 7 to 9 µs of a call). To a file or a terminal,
 * and in a worker, SonicBoom. Worker processes share stdout: a write of at most PIPE_BUF bytes
 * (4096 on Linux) to a pipe is atomic, and both the batch and SonicBoom's buffer hold whole
 * lines, so lines of two workers never mix (a stream could join queued writes past PIPE_BUF).
 */
function stdoutLines(worker: boolean, sink: DroppingSink): LineBatch {
  // The system's clock: stdout is this process's edge, as main.ts's clock is.
  return new LineBatch(sink, maxWriteOf(worker), systemClock)
}

const maxWriteOf = (worker: boolean) => (worker ? PIPE_BUF : MAX_WRITE)

/** stdout: a pipe or a socket as a libuv stream (not in a worker), else SonicBoom; both bounded. */
function stdoutSink(worker: boolean): DroppingSink {
  const pipe = worker ? null : stdoutPipe()
  if (pipe !== null) return pipe
  return BoomSink.to(1, maxWriteOf(worker))
}

/**
 * SonicBoom with a bound (its maxLength, MAX_QUEUED_LOG): past it a batch is dropped whole, its
 * lines counted, and the count said once the writes catch up. Unbounded, a worker's stdout (or
 * a file on a slow disk) held every line a flood made while its reader lagged (SPEC §4).
 */
export class BoomSink extends DroppingSink {
  /** `dest`: a file descriptor (stdout: 1) or a path; `maxWrite`: its largest write. */
  static to(dest: number | string, maxWrite: number, maxQueued = MAX_QUEUED_LOG): BoomSink {
    const boom = pino.destination({ dest, sync: false, maxWrite, maxLength: maxQueued })
    return new BoomSink(boom, maxQueued)
  }

  private constructor(
    readonly boom: ReturnType<typeof pino.destination>,
    readonly maxQueued: number
  ) {
    super()
    boom.on('drop', (data: string) => this.drop(data))
    boom.on('drain', this.caughtUp)
  }

  write(chunk: string): unknown {
    return this.boom.write(chunk)
  }
  flush(cb?: (err?: Error) => void): void {
    this.boom.flush?.(cb)
  }
  flushSync(): void {
    this.boom.flushSync?.()
  }
  end(): void {
    this.boom.end?.()
  }
}

/** stdout as a PipeSink when it is a pipe or a socket; else null. */
function stdoutPipe(): PipeSink | null {
  try {
    const st = fstatSync(1)
    return st.isFIFO() || st.isSocket() ? new PipeSink() : null
  } catch {
    return null
  }
}

/**
 * The most a reader that falls behind may leave queued in process (bytes of lines): past it,
 * lines are dropped and counted, and the count is written once the reader catches up. A stuck
 * log shipper must not grow the gateway's memory without bound under a flood (SPEC §4).
 */
export const MAX_QUEUED_LOG = 16 * 1024 * 1024

/** stdout as a non-blocking libuv stream (a pipe or a socket). */
export class PipeSink extends DroppingSink {
  constructor(
    private readonly stream: Socket = new Socket({ fd: 1, readable: false, writable: true }),
    readonly maxQueued = MAX_QUEUED_LOG
  ) {
    super()
    // A reader that went away (EPIPE) loses the lines, as it would with any destination.
    this.stream.on('error', () => {})
    this.stream.on('drain', this.caughtUp)
  }

  write(chunk: string): boolean {
    if (this.stream.writableLength > this.maxQueued) {
      this.drop(chunk)
      return false
    }
    return this.stream.write(chunk)
  }

  /** Calls back once what is queued is written (a stop waits for it, SPEC §1). */
  flush(cb?: (err?: Error) => void): void {
    if (this.stream.writableLength === 0 || this.stream.destroyed) return cb?.()
    this.stream.once('drain', () => cb?.())
  }

  end(): void {
    this.stream.end()
  }
}
