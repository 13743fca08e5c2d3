// SPEC §4 min_body_rate: a body must keep coming. Apache's mod_reqtimeout MinRate and nginx's
// client_body_timeout bound the same thing: a client that sends a byte now and then would
// otherwise hold its connection, its held bytes or its upstream connection for as long as the
// body timeout allows. Measured over any 5 s after the body's first 5 s (a slow start, a TLS
// handshake, a client's own buffering are not punished), on the injected clock.

/** Seconds a rate is measured over. */
export const PACE_WINDOW_S = 5
/** Seconds at the start of a body that are not measured. */
export const PACE_GRACE_S = 5

/** The clock's timer, as the size room takes it: runs `fn` after `ms`; returns its cancel. */
export type SetTimer = (fn: () => void, ms: number) => () => void

/** Watches one body's bytes; calls `onSlow` once when a window carried too few. */
export class BodyPace {
  /** Bytes of each of the last PACE_WINDOW_S whole seconds (a ring), the current one included. */
  private readonly bytes = new Array<number>(PACE_WINDOW_S).fill(0)
  /** Milliseconds of each of those seconds in which the reader held the body back. */
  private readonly heldMs = new Array<number>(PACE_WINDOW_S).fill(0)
  /** Whole seconds since the body began. */
  private elapsed = 0
  /** When the reader began holding the body back (null: it is asking for more). */
  private heldSince: number | null = null
  private cancelTimer: () => void = () => {}
  private stopped = false

  constructor(
    /** Bytes per second; 0 watches nothing. */
    private readonly rate: number,
    private readonly setTimer: SetTimer,
    private readonly onSlow: () => void,
    /** The clock's monotonic milliseconds (only a reader that holds the body back needs it). */
    private readonly now: () => number = () => 0
  ) {
    if (rate > 0) this.arm()
  }

  /** Bytes that arrived now. */
  add(n: number): void {
    this.bytes[this.elapsed % PACE_WINDOW_S]! += n
  }

  /**
   * The reader stops (true) or starts (false) taking the body: a streamed body waits for the
   * server to take it, and a client is asked for bytes only for the time its reader asked.
   */
  hold(held: boolean): void {
    if (held) {
      this.heldSince ??= this.now()
      return
    }
    if (this.heldSince === null) return
    this.heldMs[this.elapsed % PACE_WINDOW_S]! += this.now() - this.heldSince
    this.heldSince = null
  }

  /** The body is whole (or ended otherwise): nothing more is watched. */
  stop(): void {
    this.stopped = true
    this.cancelTimer()
  }

  private arm(): void {
    this.cancelTimer = this.setTimer(() => this.tick(), 1000)
  }

  private tick(): void {
    if (this.stopped) return
    if (this.heldSince !== null) {
      // Still held: this second's share of it counts here, the rest in the next one.
      const now = this.now()
      this.heldMs[this.elapsed % PACE_WINDOW_S]! += now - this.heldSince
      this.heldSince = now
    }
    this.elapsed++
    // The window of the last PACE_WINDOW_S whole seconds, once it lies wholly after the grace:
    // the bytes the client owed for the time the reader was asking for them.
    if (this.elapsed >= PACE_GRACE_S + PACE_WINDOW_S) {
      let sent = 0
      let held = 0
      for (let i = 0; i < PACE_WINDOW_S; i++) {
        sent += this.bytes[i]!
        held += this.heldMs[i]!
      }
      const askedMs = Math.max(0, PACE_WINDOW_S * 1000 - held)
      if (sent < (this.rate * askedMs) / 1000) {
        this.stopped = true
        this.onSlow()
        return
      }
    }
    const next = this.elapsed % PACE_WINDOW_S
    this.bytes[next] = 0
    this.heldMs[next] = 0
    this.arm()
  }
}

/** What a streamed body that came too slowly fails its upstream call with. */
export const TOO_SLOW = 'BODY_TOO_SLOW'

/**
 * A streamed body held to `rate`: the bytes pass through as the reader takes them; a window
 * that carried too few ends the stream with an error coded TOO_SLOW (the upstream call fails
 * with it, and the caller answers 408). The time the reader spent not asking is not counted.
 */
export async function* paced(
  source: AsyncIterable<Buffer>,
  rate: number,
  setTimer: SetTimer,
  now: () => number
): AsyncGenerator<Buffer> {
  let fail: (err: Error) => void = () => {}
  const tooSlow = new Promise<never>((_, reject) => (fail = reject))
  tooSlow.catch(() => {})
  const pace = new BodyPace(
    rate,
    setTimer,
    () => fail(Object.assign(new Error('the request body came too slowly'), { code: TOO_SLOW })),
    now
  )
  const it = source[Symbol.asyncIterator]()
  try {
    for (;;) {
      pace.hold(false)
      const r = await Promise.race([it.next(), tooSlow])
      pace.hold(true)
      if (r.done === true) return
      pace.add(r.value.length)
      yield r.value
    }
  } finally {
    pace.stop()
  }
}
