import type { Clock } from '../clock.js'
import type { ProtectConfig, QueuedClass, RequestClass } from '../types.js'
import { AdaptiveCeiling } from './gradient.js'
import { InFlightSlots, type SlotWait } from './slots.js'

// SPEC §9 in one process: the in-flight ceiling and its queues, `auto`, one key's share, and
// the count of calls waiting out a delay. Reads its configuration on every call, so a reload
// applies to the next call.

/** At most this many calls of one key wait out a delay at once (SPEC §9). */
export const MAX_DELAYED_PER_KEY = 100
/** The queue never holds more than this, whatever the drain estimate says. */
const MAX_WAITING = 10_000

/** What /v1/protect and /metrics show of one process (a primary sums its workers'). */
export interface ProtectState {
  max_in_flight: number | 'auto' | 'unlimited'
  /** The ceiling in force now (null: unlimited). */
  ceiling: number | null
  in_flight: Record<QueuedClass, number>
  waiting: Record<QueuedClass, number>
  /** The server's unloaded and recent time to response headers (ms), once measured. */
  unloaded_ms: number | null
  recent_ms: number | null
  shed: Record<QueuedClass, number>
  /** Calls that waited out a delay, by what the second check said. */
  delayed: { admitted: number; refused: number }
  key_in_flight: number | 'unlimited'
  key_refusals: number
}

export const QUEUED: readonly QueuedClass[] = ['other', 'auth_token', 'account', 'base']

const zeroes = (): Record<QueuedClass, number> => ({ other: 0, auth_token: 0, account: 0, base: 0 })

export interface SlotTicket {
  /** The wait's result; 'granted' means a slot is held until `release`. */
  result: Promise<SlotWait> | 'granted'
  /** The client went away while waiting: its place goes at once. */
  cancel(): void
  /**
   * The call is done with the server; `upstreamMs` is its time to response headers (null when
   * none came). Frees the slot it holds, if any (once).
   */
  release(upstreamMs: number | null): void
}

const NO_SLOT: SlotTicket = { result: 'granted', cancel: () => {}, release: () => {} }

export class Protector {
  private readonly slots: InFlightSlots
  private auto: AdaptiveCeiling | null = null
  private readonly keys = new Map<string, number>()
  private readonly delaying = new Map<string, number>()
  private readonly sheds = zeroes()
  private readonly delayed = { admitted: 0, refused: 0 }
  private keyRefusals = 0

  constructor(
    private readonly config: () => ProtectConfig,
    /** Processes sharing the instance's ceiling (workers): each holds its share. */
    private readonly processes = 1,
    private readonly clock: Clock
  ) {
    this.slots = new InFlightSlots({
      ceiling: () => this.ceiling(),
      priority: () => this.config().priority,
      maxWaiting: () => this.maxWaiting(),
      clock,
    })
  }

  /** Whether the in-flight ceiling applies at all (not `unlimited`). */
  get limiting(): boolean {
    return this.config().maxInFlight !== Infinity
  }

  /** This process's ceiling now. */
  ceiling(): number {
    const max = this.config().maxInFlight
    if (max === 'auto') return this.controller().ceiling
    return max === Infinity ? Infinity : this.share(max)
  }

  private share(n: number): number {
    return Math.max(1, Math.floor(n / this.processes))
  }

  /** `auto`'s controller; under a fixed ceiling it only measures (the queue bound, the metrics). */
  private controller(): AdaptiveCeiling {
    const min = this.share(this.config().minInFlight)
    if (this.auto === null) this.auto = new AdaptiveCeiling(min, this.clock.monotonic())
    else this.auto.setMin(min)
    return this.auto
  }

  /**
   * Calls the slots can serve within queue_ms at the recent pace (at least one per slot, at
   * most MAX_WAITING): a longer queue could only shed later what it sheds now.
   */
  private maxWaiting(): number {
    const ceiling = this.ceiling()
    const pace = this.auto?.state().recentMs ?? null
    const queueMs = this.config().queueMs
    // Before any call came back the pace is unknown: room for a hundred calls per slot.
    const drained = pace === null || pace <= 0 ? ceiling * 100 : (ceiling * queueMs) / pace
    return Math.min(MAX_WAITING, Math.max(ceiling, Math.ceil(drained)))
  }

  /**
   * SPEC §9: a slot for a call of `cls` (exempt calls never wait), waiting up to queue_ms.
   * Synchronous when a slot is free (the common case costs no promise).
   */
  slot(cls: RequestClass): SlotTicket {
    if (cls === 'exempt' || !this.limiting) return NO_SLOT
    if (this.slots.tryTake(cls)) {
      this.auto?.observeInFlight(this.slots.inFlight)
      return this.ticket(cls, 'granted', () => {})
    }
    const w = this.slots.wait(cls, this.config().queueMs)
    const result = w.result.then((r) => {
      if (r === 'shed') this.sheds[cls]++
      else if (r === 'granted') this.auto?.observeInFlight(this.slots.inFlight)
      return r
    })
    return this.ticket(cls, result, w.cancel)
  }

  private ticket(cls: QueuedClass, result: SlotTicket['result'], cancel: () => void): SlotTicket {
    let held = result === 'granted'
    if (!held) void (result as Promise<SlotWait>).then((r) => (held = r === 'granted'))
    return {
      result,
      cancel,
      release: (upstreamMs) => {
        if (!held) return
        held = false
        if (upstreamMs !== null) this.controller().sample(upstreamMs, this.clock.monotonic())
        this.slots.release(cls)
      },
    }
  }

  /** SPEC §9 key_in_flight: takes one of the key's places, or false when all are taken. */
  enterKey(key: string): boolean {
    const max = this.config().keyInFlight
    if (max === Infinity) return true
    const n = this.keys.get(key) ?? 0
    if (n >= max) {
      this.keyRefusals++
      return false
    }
    this.keys.set(key, n + 1)
    return true
  }

  leaveKey(key: string): void {
    const n = this.keys.get(key)
    if (n === undefined) return
    if (n <= 1) this.keys.delete(key)
    else this.keys.set(key, n - 1)
  }

  /** SPEC §9 delay_ms: a place among the key's delayed calls, or false when 100 wait. */
  startDelay(key: string): boolean {
    const n = this.delaying.get(key) ?? 0
    if (n >= MAX_DELAYED_PER_KEY) return false
    this.delaying.set(key, n + 1)
    return true
  }

  endDelay(key: string, admitted: boolean | null): void {
    const n = this.delaying.get(key) ?? 1
    if (n <= 1) this.delaying.delete(key)
    else this.delaying.set(key, n - 1)
    if (admitted === true) this.delayed.admitted++
    else if (admitted === false) this.delayed.refused++
  }

  state(): ProtectState {
    const c = this.config()
    const inFlight = zeroes()
    const waiting = zeroes()
    for (const cls of QUEUED) {
      inFlight[cls] = this.slots.inFlightOf(cls)
      waiting[cls] = this.slots.waitingOf(cls)
    }
    const measured = this.auto?.state() ?? null
    const ceiling = this.ceiling()
    return {
      max_in_flight: c.maxInFlight === Infinity ? 'unlimited' : c.maxInFlight,
      ceiling: ceiling === Infinity ? null : ceiling,
      in_flight: inFlight,
      waiting,
      unloaded_ms: measured?.unloadedMs ?? null,
      recent_ms: measured?.recentMs ?? null,
      shed: { ...this.sheds },
      delayed: { ...this.delayed },
      key_in_flight: c.keyInFlight === Infinity ? 'unlimited' : c.keyInFlight,
      key_refusals: this.keyRefusals,
    }
  }
}

/** A primary's view: its workers' states summed (latencies: the slowest worker's). */
export function sumStates(states: readonly ProtectState[]): ProtectState | null {
  if (states.length === 0) return null
  const out = structuredClone(states[0]!)
  for (const s of states.slice(1)) {
    out.ceiling = out.ceiling === null || s.ceiling === null ? null : out.ceiling + s.ceiling
    for (const cls of QUEUED) {
      out.in_flight[cls] += s.in_flight[cls]
      out.waiting[cls] += s.waiting[cls]
      out.shed[cls] += s.shed[cls]
    }
    out.unloaded_ms = maxOf(out.unloaded_ms, s.unloaded_ms)
    out.recent_ms = maxOf(out.recent_ms, s.recent_ms)
    out.delayed.admitted += s.delayed.admitted
    out.delayed.refused += s.delayed.refused
    out.key_refusals += s.key_refusals
  }
  return out
}

const maxOf = (a: number | null, b: number | null) =>
  a === null ? b : b === null ? a : Math.max(a, b)
