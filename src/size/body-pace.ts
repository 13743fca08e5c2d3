// SPEC §4 min_body_rate: a body must keep coming. Apache's mod_reqtimeout MinRate and nginx's
// client_body_timeout bound the same thing: a client that sends a byte now and then would
// otherwise hold its connection, its held bytes or its upstream connection for as long as the
// body timeout allows. Judged as the average since the body's first byte, from its 10th second
// on (a slow start, a TLS handshake, a phone's bursty radio are not punished: a phone uploading
// at 20 KiB/s is never cut by the default 8 KiB/s), on the injected clock. A head that sends no
// byte is not watched here at all: body_timeout_ms bounds it, and it holds nothing.

/** Seconds after the first byte before the average is first judged. */
export const PACE_GRACE_S = 10

/** The clock's timer, as the size room takes it: runs `fn` after `ms`; returns its cancel. */
export type SetTimer = (fn: () => void, ms: number) => () => void

/** Watches one body's bytes; calls `onSlow` once when its average fell below the rate. */
export class BodyPace {
  /** Bytes since the first. */
  private total = 0
  /** Whole seconds since the first byte (the timer's ticks). */
  private elapsed = 0
  /** Milliseconds in which the reader held the body back (not asked of the client). */
  private heldMs = 0
  /** When the reader began holding the body back (null: it is asking for more). */
  private heldSince: number | null = null
  private cancelTimer: (() => void) | null = null
  private stopped = false

  constructor(
    /** Bytes per second; 0 watches nothing. */
    private readonly rate: number,
    private readonly setTimer: SetTimer,
    /** Told once when the average fell too low (a body read ahead, then streamed, moves it). */
    public onSlow: () => void,
    /** The clock's monotonic milliseconds (only a reader that holds the body back needs it). */
    private readonly now: () => number = () => 0
  ) {}

  /** Bytes that arrived now; the first starts the watch (one timer a second, per body). */
  add(n: number): void {
    this.total += n
    if (this.cancelTimer === null && this.rate > 0 && !this.stopped) this.arm()
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
    if (this.cancelTimer !== null) this.heldMs += this.now() - this.heldSince
    this.heldSince = null
  }

  /** The body is whole (or ended otherwise): nothing more is watched. */
  stop(): void {
    this.stopped = true
    this.cancelTimer?.()
  }

  private arm(): void {
    this.cancelTimer = this.setTimer(() => this.tick(), 1000)
  }

  private tick(): void {
    if (this.stopped) return
    if (this.heldSince !== null) {
      const now = this.now()
      this.heldMs += now - this.heldSince
      this.heldSince = now
    }
    this.elapsed++
    if (this.elapsed >= PACE_GRACE_S) {
      // The bytes the client owed for the time its reader was asking for them.
      const askedMs = Math.max(0, this.elapsed * 1000 - this.heldMs)
      if (this.total < (this.rate * askedMs) / 1000) {
        this.stopped = true
        this.onSlow()
        return
      }
    }
    this.arm()
  }
}

/** What a streamed body that came too slowly fails its upstream call with. */
export const TOO_SLOW = 'BODY_TOO_SLOW'

/**
 * A streamed body held to `rate`: the bytes pass through as the reader takes them; an average
 * that fell too low ends the stream with an error coded TOO_SLOW (the upstream call fails with
 * it, and the caller answers 408). The time the reader spent not asking is not counted.
 * `pace`: the watch of a body whose first part was read ahead (its average runs from its first byte).
 */
export async function* paced(
  source: AsyncIterable<Buffer>,
  rate: number,
  setTimer: SetTimer,
  now: () => number,
  pace?: BodyPace
): AsyncGenerator<Buffer> {
  // Not Promise.race against one promise that settles when the body is too slow: each race
  // left a reaction on it holding its result, so every chunk streamed stayed in memory until
  // the body ended (a 128 MiB upload held 128 MiB). A promise a chunk, woken by either side.
  let slowed = false
  let wake: (() => void) | null = null
  const watch = pace ?? new BodyPace(rate, setTimer, () => {}, now)
  watch.onSlow = () => {
    slowed = true
    wake?.()
  }
  const it = source[Symbol.asyncIterator]()
  try {
    for (;;) {
      watch.hold(false)
      const r = await new Promise<IteratorResult<Buffer> | null>((resolve, reject) => {
        if (slowed) return resolve(null)
        wake = () => resolve(null)
        it.next().then(resolve, reject)
      })
      wake = null
      watch.hold(true)
      if (r === null)
        throw Object.assign(new Error('the request body came too slowly'), { code: TOO_SLOW })
      if (r.done === true) return
      watch.add(r.value.length)
      yield r.value
    }
  } finally {
    watch.stop()
  }
}
