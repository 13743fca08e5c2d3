import { randomBytes } from 'node:crypto'
import { every, type Clock, type Timer } from '../clock.js'
import type { BatchId } from '../types.js'

// "Count in memory, write to the store every few seconds, keep what failed, never write twice"
// (SPEC §5, §8, §11): one recorder with that contract, for the day counts, the team ledger's
// late calls, the upgrade report and the tuning shapes.
//
// Never twice: every batch is sealed with this process's id and a sequence number, and the
// store applies a batch to a key only when that key has not yet seen this process's number
// (each writer's script keeps the last number per process in the key itself). A write that
// timed out but landed is written again whole, with the same number: what landed is skipped,
// the rest lands. So batches are written in order, one in doubt at a time: new counts gather
// in the open batch (bounded by its owner) until the one in doubt is known to have landed.

export type { BatchId }

/** What a recorder needs of its batches. */
export interface BatchOps<B> {
  empty(): B
  /** Nothing to write. */
  isEmpty(b: B): boolean
  /** What a batch holds, for the line that says what a stop could not write (calls, usually). */
  weight(b: B): number
  /**
   * Writes the batch. Applied at most once per key for one id: a second write of the same id
   * changes nothing that landed. Rejects when any part may not have landed.
   */
  write(b: B, id: BatchId): Promise<void>
  /** What the owner's bound left out of the batch (calls), zeroed as it is taken. */
  takeDropped?(b: B): number
}

export interface RecorderOptions {
  clock: Clock
  /** This process's id (one per process: instanceId()). */
  instance: string
  /** A write failed (the batch is kept and written again). */
  onError?: (err: unknown) => void
  /** A write landed after at least one had failed. */
  onBack?: () => void
  /** Calls a batch's bound left out, told once a write (its owner's takeDropped). */
  onDropped?: (calls: number) => void
}

/** A fresh id for this process's writes (its recorders share it: their keys differ). */
export function instanceId(): string {
  return randomBytes(6).toString('hex')
}

export class BatchedRecorder<B> {
  /** Where counts gather now. */
  private open: B
  /** The sealed batch that was written and may or may not have landed. */
  private inDoubt: { batch: B; seq: number } | null = null
  private seq = 0
  private failing = false
  private timer: Timer | null = null
  private flushing: Promise<boolean> = Promise.resolve(true)

  constructor(
    private readonly ops: BatchOps<B>,
    private readonly opts: RecorderOptions
  ) {
    this.open = ops.empty()
  }

  /** The batch to count into now (its owner bounds it). */
  get batch(): B {
    return this.open
  }

  /** What is not yet known to be written (the open batch and the one in doubt). */
  get pending(): number {
    const doubt = this.inDoubt === null ? 0 : this.ops.weight(this.inDoubt.batch)
    return doubt + this.ops.weight(this.open)
  }

  /**
   * Writes the batch in doubt, then seals and writes the open one. Resolves true when nothing is
   * left unwritten, false when a write failed (what it held is kept for the next flush).
   */
  flush(): Promise<boolean> {
    this.flushing = this.flushing.then(() => this.writeAll())
    return this.flushing
  }

  private async writeAll(): Promise<boolean> {
    if (this.inDoubt !== null && !(await this.writeInDoubt())) return false
    if (this.ops.isEmpty(this.open)) return true
    this.inDoubt = { batch: this.open, seq: ++this.seq }
    this.open = this.ops.empty()
    return this.writeInDoubt()
  }

  private async writeInDoubt(): Promise<boolean> {
    const d = this.inDoubt!
    const dropped = this.ops.takeDropped?.(d.batch) ?? 0
    if (dropped > 0) this.opts.onDropped?.(dropped)
    try {
      await this.ops.write(d.batch, { instance: this.opts.instance, seq: d.seq })
    } catch (err) {
      this.failing = true
      this.opts.onError?.(err)
      return false
    }
    this.inDoubt = null
    if (this.failing) {
      this.failing = false
      this.opts.onBack?.()
    }
    return true
  }

  start(everyMs: number): void {
    this.timer = every(this.opts.clock, everyMs, () => void this.flush())
  }

  /**
   * Stops the timer and writes what is held, trying again until `waitMs` passed (SIGTERM's
   * bounded wait); resolves with what could not be written (0 when all of it was).
   */
  async stop(waitMs = 0): Promise<number> {
    this.timer?.cancel()
    this.timer = null
    const deadline = this.opts.clock.monotonic() + waitMs
    for (;;) {
      if (await this.flush()) return 0
      if (this.opts.clock.monotonic() >= deadline) return this.pending
      // A real timer: the process must stay up for this bounded wait (the clock's are unref'd).
      await new Promise<void>((r) => setTimeout(r, 250))
    }
  }
}

/** BatchOps.takeDropped for a batch that keeps its tally in `dropped`. */
export function takeDropped(b: { dropped: number }): number {
  const n = b.dropped
  b.dropped = 0
  return n
}

/**
 * A recorder's face to its owner, for the four built on a BatchedRecorder (the day counts, the
 * late ledger, the upgrade report, the tuning evidence): write now, on a timer, at a stop.
 */
export abstract class BatchedFront<B> {
  protected readonly recorder: BatchedRecorder<B>

  constructor(ops: BatchOps<B>, opts: RecorderOptions) {
    this.recorder = new BatchedRecorder<B>(ops, opts)
  }

  /** Writes what was counted; what failed is kept and written when the store answers. */
  flush(): Promise<boolean> {
    return this.recorder.flush()
  }

  start(everyMs: number): void {
    this.recorder.start(everyMs)
  }

  /** Writes what is held within `waitMs`; the calls that could not be written. */
  stop(waitMs = 0): Promise<number> {
    return this.recorder.stop(waitMs)
  }

  /** Calls not yet known to be written (the open batch and the one in doubt). */
  get pending(): number {
    return this.recorder.pending
  }
}
