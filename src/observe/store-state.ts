import { every, type Clock, type Timer } from '../clock.js'
import type { Logger } from './log.js'
import { HealthMachine, HEALTHY, type HealthView } from './health.js'
import type { OnStoreError, StoreKind } from '../types.js'

// SPEC §4, §7: the store's state, failing or answering, one machine (observe/health.ts) fed by
// every rate-limit call the guard makes and by a probe every PROBE_MS that *writes* (a Redis
// that answers PING but refuses writes, `OOM`, `READONLY`, `MISCONF`, is failing: its scripts
// are refused, and each instance would limit alone while /readyz said "up"). /readyz, the page,
// /v1/status, the log and basegate_store_up all read this one state, with the store's words.

/** How often the store is probed, traffic or not (so an alert follows the page without traffic). */
export const PROBE_MS = 5_000

export interface StoreStateDeps {
  kind: StoreKind
  /** A small write to the store: null when it landed, else the store's words. */
  probe: () => Promise<string | null>
  clock: Clock
  logger: Logger
  /** Where the store is (password masked), for the lines. */
  address: string
  onError: () => OnStoreError
}

export class StoreState {
  private readonly health: HealthMachine
  private timer: Timer | null = null
  /** When the oldest check still unanswered began (null when none is out). */
  private asked: number | null = null

  constructor(private readonly deps: StoreStateDeps) {
    this.health = new HealthMachine({
      onChange: (failing, view) => {
        const store = deps.address
        if (failing)
          deps.logger.warn(
            { store, since: view.since_ms, error: view.error, on_error: deps.onError() },
            'store unavailable'
          )
        else if (view.last !== null)
          deps.logger.info(
            { store, since: view.last.start_ms, lasted_s: view.last.lasted_s },
            'store available again'
          )
      },
    })
  }

  /** One store call's end (the guard's calls): its failure's words, or null when it answered. */
  seen(error: string | null): void {
    if (this.deps.kind === 'memory') return
    this.health.seen(this.deps.clock.now(), error !== null, error)
  }

  /** Probes now: whether the store took a write (the result feeds the state). */
  async check(): Promise<boolean> {
    if (this.deps.kind === 'memory') return true
    const asked = this.deps.clock.now()
    this.asked ??= asked
    const error = await this.deps.probe().catch((err: unknown) => String(err))
    if (this.asked === asked) this.asked = null
    this.seen(error)
    return error === null
  }

  /** Probes every PROBE_MS until stop(). */
  start(): void {
    if (this.deps.kind === 'memory' || this.timer !== null) return
    this.timer = every(this.deps.clock, PROBE_MS, () => void this.check())
  }

  stop(): void {
    this.timer?.cancel()
    this.timer = null
  }

  /** Whether the store answers now (as the state says: failing after FALL failures in a row). */
  get up(): boolean {
    return !this.health.failing
  }

  view(): HealthView {
    return this.deps.kind === 'memory' ? HEALTHY : this.health.view()
  }

  /**
   * Since when the store has not answered (a run of failed calls, or a check still out; null
   * when it answers): a store that freezes is
   * "not answering" to a reader before the machine has seen FALL failures, and the page says
   * since when rather than nothing.
   */
  unansweredSince(): number | null {
    return this.health.runSince() ?? this.asked
  }
}
