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
  /** Bytes of each of the last PACE_WINDOW_S whole seconds (a ring), and the current one. */
  private readonly ring = new Array<number>(PACE_WINDOW_S).fill(0)
  /** Seconds in which the reader, not the client, held the body back (never judged). */
  private readonly excused = new Array<boolean>(PACE_WINDOW_S).fill(false)
  /** The reader holds the body back now (the server reads slowly): the client is not judged. */
  private held = false
  /** Whole seconds since the body began. */
  private elapsed = 0
  private cancelTimer: () => void = () => {}
  private stopped = false

  constructor(
    /** Bytes per second; 0 watches nothing. */
    private readonly rate: number,
    private readonly setTimer: SetTimer,
    private readonly onSlow: () => void
  ) {
    if (rate > 0) this.arm()
  }

  /** Bytes that arrived now. */
  add(n: number): void {
    this.ring[this.elapsed % PACE_WINDOW_S]! += n
  }

  /**
   * The reader stops (true) or starts (false) taking the body: a streamed body waits for the
   * server to take it, and a client is never judged for the seconds its reader held it back.
   */
  hold(held: boolean): void {
    this.held = held
    if (held) this.excused[this.elapsed % PACE_WINDOW_S] = true
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
    this.elapsed++
    // The window of the last PACE_WINDOW_S whole seconds, once it lies wholly after the grace.
    if (this.elapsed >= PACE_GRACE_S + PACE_WINDOW_S && !this.excused.includes(true)) {
      let sum = 0
      for (const n of this.ring) sum += n
      if (sum < this.rate * PACE_WINDOW_S) {
        this.stopped = true
        this.onSlow()
        return
      }
    }
    const next = this.elapsed % PACE_WINDOW_S
    this.ring[next] = 0
    this.excused[next] = this.held
    this.arm()
  }
}

/** What a streamed body that came too slowly fails its upstream call with. */
export const TOO_SLOW = 'BODY_TOO_SLOW'

/**
 * A streamed body held to `rate`: the bytes pass through as the reader takes them; a window
 * that carried too few ends the stream with an error coded TOO_SLOW (the upstream call fails
 * with it, and the caller answers 408). Seconds the reader spent not asking are never judged.
 */
export async function* paced(
  source: AsyncIterable<Buffer>,
  rate: number,
  setTimer: SetTimer
): AsyncGenerator<Buffer> {
  let fail: (err: Error) => void = () => {}
  const tooSlow = new Promise<never>((_, reject) => (fail = reject))
  tooSlow.catch(() => {})
  const pace = new BodyPace(rate, setTimer, () =>
    fail(Object.assign(new Error('the request body came too slowly'), { code: TOO_SLOW }))
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
