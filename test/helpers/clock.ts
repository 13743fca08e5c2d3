import type { Clock, Timer } from '../../src/clock.js'

interface Pending {
  at: number
  fn: () => void
  cancelled: boolean
}

/** A clock the test moves: wall and monotonic time advance together; due timers run in order. */
export class FakeClock implements Clock {
  private mono = 0
  private readonly pending: Pending[] = []

  constructor(private wall: number) {}

  now(): number {
    return this.wall
  }

  monotonic(): number {
    return this.mono
  }

  setTimer(fn: () => void, ms: number): Timer {
    const p: Pending = { at: this.mono + Math.max(0, ms), fn, cancelled: false }
    this.pending.push(p)
    return { cancel: () => void (p.cancelled = true) }
  }

  /** Timers not yet run or cancelled. */
  get timers(): number {
    return this.pending.filter((p) => !p.cancelled).length
  }

  /** Moves time on by `ms`, running every timer that falls due on the way (also ones they set). */
  advance(ms: number): void {
    const end = this.mono + ms
    for (;;) {
      let next: Pending | undefined
      for (const p of this.pending)
        if (!p.cancelled && p.at <= end && (next === undefined || p.at < next.at)) next = p
      if (next === undefined) break
      this.pending.splice(this.pending.indexOf(next), 1)
      this.step(next.at - this.mono)
      next.fn()
    }
    this.step(end - this.mono)
    for (let i = this.pending.length - 1; i >= 0; i--)
      if (this.pending[i]!.cancelled) this.pending.splice(i, 1)
  }

  /** Moves the wall clock to `wallMs` (never back). */
  set(wallMs: number): void {
    if (wallMs < this.wall)
      throw new Error(`the fake clock does not go back (${wallMs} < ${this.wall})`)
    this.advance(wallMs - this.wall)
  }

  private step(ms: number): void {
    this.mono += ms
    this.wall += ms
  }
}
