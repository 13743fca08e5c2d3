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
    const t = setTimeout(fn, ms)
    t.unref()
    return { cancel: () => clearTimeout(t) }
  },
}
