import type { ServerResponse } from 'node:http'
import type { Clock, Timer } from '../clock.js'
import type { AnswerSpool } from './answer-spool.js'

// SPEC §4 "Answers", the client's side of a forwarded call once the client falls behind (a
// call whose client keeps up never makes one): what it does not take yet waits in a spool
// (memory, then a temporary file), so the server's answer is read whole at its own pace and its
// connection freed; only past the spool's bounds does the server wait for the client. A client
// that takes no byte of its answer for `stallMs` is cut (nginx's send_timeout), with what it
// had taken.

export interface RelayEvents {
  /** The answer is whole at the client's side (ended), or the client was cut after the server's part. */
  ended(): void
  /** The server goes on sending (the spool has room again). */
  resume(): void
}

export class AnswerRelay {
  /** Bytes the server sent. */
  bytes = 0
  /** basegate cut the client (it took no byte of its answer in time). */
  cut = false
  private spool: AnswerSpool | null = null
  /** The response asked for a drain: the client has not taken what it was given. */
  private waiting = false
  /** The server waits for the client (the spool had no room). */
  private paused = false
  private upstreamDone = false
  private pumping = false
  private stall: Timer | null = null
  private closed = false

  constructor(
    private readonly res: ServerResponse,
    private readonly clock: Clock,
    private readonly stallMs: number,
    /** Where what the client has not taken waits (null: nowhere, the server waits). */
    private readonly source: { holdAnswer?(): AnswerSpool | null },
    private readonly events: RelayEvents
  ) {}

  /** The client did not take the last write: what comes next waits. */
  behind(): void {
    this.waitForClient()
  }

  /** A chunk from the server: true to go on reading, false when the server is to wait. */
  data(chunk: Buffer): boolean {
    this.bytes += chunk.length
    const res = this.res
    if (!this.waiting && (this.spool === null || this.spool.pending === 0)) {
      if (!res.write(chunk)) this.waitForClient()
      return true
    }
    // The client is behind: the chunk waits here, and the server goes on.
    this.spool ??= this.source.holdAnswer?.() ?? null
    if (this.spool !== null && this.spool.add(chunk)) return true
    // Past the bounds: this chunk waits in the response, and the server for the client.
    res.write(chunk)
    this.paused = true
    return false
  }

  /** The server's answer is whole: the client's ends when it has taken what waits. */
  complete(): void {
    this.upstreamDone = true
    if (!this.waiting && !this.pumping && this.pendingBytes() === 0) this.end()
  }

  /** What the client took of the answer (a cut client's: what its socket accepted). */
  get taken(): number {
    return this.bytes - this.pendingBytes() - this.res.writableLength
  }

  /** Frees what waits (the call is over, however it ended). */
  close(): void {
    this.closed = true
    this.stall?.cancel()
    this.stall = null
    this.spool?.release()
  }

  private pendingBytes(): number {
    return this.spool?.pending ?? 0
  }

  private end(): void {
    if (this.closed) return
    this.res.end()
    this.events.ended()
  }

  private readonly onStall = (): void => {
    this.stall = null
    this.cut = true
    this.res.destroy()
    // With the server's part over, nothing else will end the call.
    if (this.upstreamDone) this.events.ended()
  }

  private readonly onDrain = (): void => {
    this.waiting = false
    this.stall?.cancel()
    this.stall = null
    void this.pump()
  }

  private waitForClient(): void {
    if (this.waiting) return
    this.waiting = true
    this.stall = this.clock.setTimer(this.onStall, this.stallMs)
    this.res.once('drain', this.onDrain)
  }

  /** Hands the client what waits, as fast as it takes it; then the server goes on, or the answer ends. */
  private async pump(): Promise<void> {
    if (this.pumping) return
    this.pumping = true
    const res = this.res
    try {
      while (!this.waiting && this.spool !== null && this.spool.pending > 0) {
        const c = await this.spool.take()
        if (c === null || res.destroyed) break
        if (!res.write(c)) this.waitForClient()
      }
    } catch {
      // The temporary file failed: the answer cannot be finished, so the client is cut.
      res.destroy()
      return
    } finally {
      this.pumping = false
    }
    if (this.waiting || res.destroyed) return
    if (this.paused) {
      this.paused = false
      this.events.resume()
    }
    if (this.upstreamDone) this.end()
  }
}
