import type { Clock, Timer } from '../clock.js'
import type { QueuedClass } from '../types.js'

/** How a wait for a slot ended. */
export type SlotWait = 'granted' | 'shed' | 'cancelled'

interface Waiter {
  cls: QueuedClass
  settle: (r: SlotWait) => void
  timer: Timer | null
  /** Set once settled: a cancelled waiter stays in its queue until it reaches the head. */
  done: boolean
}

/** A FIFO of waiters with O(1) shift (a head index; compacted when half is spent). */
class Fifo {
  private items: Waiter[] = []
  private head = 0
  /** Live (not yet settled) waiters. */
  live = 0

  push(w: Waiter): void {
    this.items.push(w)
    this.live++
  }

  /** The oldest live waiter, taken out; settled ones on the way are dropped. */
  shift(): Waiter | null {
    while (this.head < this.items.length) {
      const w = this.items[this.head++]!
      if (this.head > 64 && this.head * 2 > this.items.length) {
        this.items = this.items.slice(this.head)
        this.head = 0
      }
      if (!w.done) return w
    }
    return null
  }

  /** The newest live waiter, taken out (the one shed when a better class needs its place). */
  pop(): Waiter | null {
    while (this.items.length > this.head) {
      const w = this.items.pop()!
      if (!w.done) return w
    }
    return null
  }
}

export interface SlotOptions {
  /** The ceiling now (read on every take and release: `auto` moves it). */
  ceiling: () => number
  /** Classes in the order a freed slot serves them. */
  priority: () => readonly QueuedClass[]
  /**
   * The most calls that may wait at once: past it the newest waiter of a lower class gives its
   * place to the arrival, or the arrival is shed at once (the queue's memory is bounded).
   */
  maxWaiting: () => number
  /** queue_ms's timers. */
  clock: Clock
}

/**
 * SPEC §9's in-flight ceiling: a call holds a slot while it is at the server; one that finds
 * none waits in its class's queue, and a freed slot goes to the oldest waiter of the first
 * class in `priority`. Counts are per class, for the metrics and /v1/protect.
 */
export class InFlightSlots {
  private total = 0
  private readonly held = new Map<QueuedClass, number>()
  private readonly queues = new Map<QueuedClass, Fifo>()
  private waitingTotal = 0

  constructor(private readonly opts: SlotOptions) {}

  get inFlight(): number {
    return this.total
  }

  get waiting(): number {
    return this.waitingTotal
  }

  inFlightOf(cls: QueuedClass): number {
    return this.held.get(cls) ?? 0
  }

  waitingOf(cls: QueuedClass): number {
    return this.queues.get(cls)?.live ?? 0
  }

  /** Takes a slot now if one is free and nobody waits for it. */
  tryTake(cls: QueuedClass): boolean {
    if (this.waitingTotal > 0 || this.total >= this.opts.ceiling()) return false
    this.hold(cls)
    return true
  }

  /**
   * Waits up to `ms` for a slot. `cancel` (the client went away) takes the waiter out at once.
   * Resolves 'granted' with the slot held (release it), 'shed' or 'cancelled' without one.
   */
  wait(cls: QueuedClass, ms: number): { result: Promise<SlotWait>; cancel: () => void } {
    if (this.tryTake(cls)) return { result: Promise.resolve('granted'), cancel: () => {} }
    if (!this.makeRoom(cls) || ms <= 0) return { result: Promise.resolve('shed'), cancel: () => {} }
    let w!: Waiter
    const result = new Promise<SlotWait>((resolve) => {
      w = { cls, settle: resolve, timer: null, done: false }
    })
    w.timer = this.opts.clock.setTimer(() => this.settle(w, 'shed'), ms)
    this.queueOf(cls).push(w)
    this.waitingTotal++
    return { result, cancel: () => this.settle(w, 'cancelled') }
  }

  /** Frees a slot; the first waiter in priority order takes it (while the ceiling allows). */
  release(cls: QueuedClass): void {
    this.total--
    this.held.set(cls, (this.held.get(cls) ?? 1) - 1)
    this.drain()
  }

  /** Hands free slots to waiters (after a release, or when `auto` raised the ceiling). */
  drain(): void {
    while (this.waitingTotal > 0 && this.total < this.opts.ceiling()) {
      const w = this.firstWaiter()
      if (w === null) return
      this.hold(w.cls)
      this.settle(w, 'granted')
    }
  }

  private hold(cls: QueuedClass): void {
    this.total++
    this.held.set(cls, (this.held.get(cls) ?? 0) + 1)
  }

  private firstWaiter(): Waiter | null {
    for (const cls of this.opts.priority()) {
      const w = this.queues.get(cls)?.shift() ?? null
      if (w !== null) return w
    }
    return null
  }

  /**
   * Whether the arrival may wait: yes while the queue has room; when full, the newest waiter
   * of the lowest class below the arrival's is shed for it; else no.
   */
  private makeRoom(cls: QueuedClass): boolean {
    if (this.waitingTotal < this.opts.maxWaiting()) return true
    const order = this.opts.priority()
    const rank = order.indexOf(cls)
    for (let i = order.length - 1; i > rank; i--) {
      const w = this.queues.get(order[i]!)?.pop() ?? null
      if (w !== null) {
        this.settle(w, 'shed')
        return true
      }
    }
    return false
  }

  private settle(w: Waiter, r: SlotWait): void {
    if (w.done) return
    w.done = true
    if (w.timer !== null) w.timer.cancel()
    this.waitingTotal--
    const q = this.queues.get(w.cls)
    if (q !== undefined) q.live--
    w.settle(r)
  }

  private queueOf(cls: QueuedClass): Fifo {
    let q = this.queues.get(cls)
    if (q === undefined) this.queues.set(cls, (q = new Fifo()))
    return q
  }
}
