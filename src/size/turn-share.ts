// SPEC §4: bodies are read and counted as they arrive, on the one event loop every other call
// of the process also needs. Unbounded, a turn of the loop took whatever the sockets held: libuv
// reads a readable socket up to 32 times a wake, so ten large uploads delivered some 20 MiB a
// turn, about 200 ms of row counting on a slow core, and a small call, which needs three turns
// (its connection, its head, its answer), waited 0.5 to 1.6 s behind them (issue #15's claim,
// `test/heavy/size-latency`). So the body bytes read in one turn are bounded: a reader past
// the bound pauses, and reads on in the next turn, after the loop has seen every other socket.

/** Body bytes read in one turn of the loop before readers wait for the next (0.5 to 2 ms of counting). */
export const BODY_BYTES_PER_TURN = 256 * 1024

export class TurnShare {
  private used = 0
  private turnEnds = false
  private waiting: Array<() => void> = []

  constructor(readonly perTurn: number = BODY_BYTES_PER_TURN) {}

  /**
   * Counts bytes a reader has just handled in this turn; false once the turn's share is spent
   * (the reader pauses and calls `next`).
   */
  take(bytes: number): boolean {
    this.used += bytes
    if (!this.turnEnds) {
      this.turnEnds = true
      // The check phase comes after the loop's poll for I/O: every socket ready in this turn
      // has been seen when it runs.
      setImmediate(this.nextTurn)
    }
    return this.used <= this.perTurn
  }

  /** Calls `resume` in the next turn, when its share is new (readers in the order they waited). */
  next(resume: () => void): void {
    this.waiting.push(resume)
    if (!this.turnEnds) {
      this.turnEnds = true
      setImmediate(this.nextTurn)
    }
  }

  /** Bytes handled in this turn so far (tests). */
  get usedThisTurn(): number {
    return this.used
  }

  private readonly nextTurn = (): void => {
    this.turnEnds = false
    this.used = 0
    const waiting = this.waiting
    if (waiting.length === 0) return
    this.waiting = []
    for (const resume of waiting) resume()
  }
}

/** The process's one share: every held body's reader takes from it. */
export const bodyTurns = new TurnShare()
