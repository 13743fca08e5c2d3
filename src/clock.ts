// Time, injected (Envoy's TimeSource): main.ts hands the system clock down; tests drive a fake
// one (test/helpers/clock.ts), so a controller, a lease or a batch runs its production path on
// a clock the test moves, without sleeps.

export interface Timer {
  cancel(): void
}

export interface Clock {
  /** Wall-clock milliseconds since the epoch. */
  now(): number
  /** Monotonic milliseconds (never steps back; for deadlines and durations). */
  monotonic(): number
  /** Runs `fn` once after `ms` on the monotonic clock; the timer never keeps the process alive. */
  setTimer(fn: () => void, ms: number): Timer
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimer(fn, ms) {
    // A deadline already past (a lease granted after its bucket ended on this clock) runs at
    // once: Node takes a negative delay as 1 ms too, but says so on stderr every time.
    const t = setTimeout(fn, ms > 0 ? ms : 0)
    t.unref()
    return { cancel: () => clearTimeout(t) }
  },
}

/** Waits `ms` on the clock. */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => void clock.setTimer(resolve, ms))
}

/** Runs `fn` every `ms` on the clock until the returned timer is cancelled. */
export function every(clock: Clock, ms: number, fn: () => void): Timer {
  let current: Timer
  let stopped = false
  const arm = () => {
    current = clock.setTimer(() => {
      if (stopped) return
      arm()
      fn()
    }, ms)
  }
  arm()
  return {
    cancel: () => {
      stopped = true
      current.cancel()
    },
  }
}
