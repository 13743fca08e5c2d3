import type { Clock } from '../clock.js'
import type { Charge, ConsumeOptions, Decision, GiveBack, OnStoreError, Windows } from '../types.js'
import type { MemoryStore } from './memory-store.js'
import { OverLimitCache } from './over-limit-cache.js'
import { StoreError } from './store-error.js'

export interface GuardedStoreOptions {
  onError: OnStoreError
  /** The local limiter that answers while the store is down under `on_error: open`. */
  fallback: MemoryStore
  /** Told once when the store is found down and once when it answers again (not per request). */
  onOutage?: (down: boolean, err?: unknown) => void
  /** Answer known-full windows from memory (default true). */
  overLimitCache?: boolean
  /** Consecutive failed calls that mark the store down (default 3). */
  failuresToTrip?: number
  /** While down, one call in this long goes to the store to see whether it is back (default 1000). */
  probeEveryMs?: number
  /** The breaker's probe times and the calls' durations (the system's clock by default). */
  clock: Clock
  /** Metrics and the store's state: each call's end (its error when it failed). */
  observe?: {
    call(seconds: number, ok: boolean, err?: unknown): void
    fallback(): void
    cached(): void
  }
}

/**
 * Resilience around the shared store, as a decorator:
 * - the local over-limit cache answers floods on a full window without a store round trip;
 * - a circuit breaker: the store is "down" after `failuresToTrip` consecutive failures (one
 *   slow call under load does not flip the instance); while down, calls do not wait on the
 *   store at all, and one probe a second tells when it is back;
 * - SPEC §1 store.on_error: a call the store cannot answer gets `open`: the local in-memory
 *   limiter (each instance then limits alone); `closed`: the StoreError, and the gateway
 *   answers 503.
 */
export class GuardedStore implements Windows {
  private readonly fallback: MemoryStore
  private readonly clock: Clock
  private readonly overLimit: OverLimitCache | null
  private readonly failuresToTrip: number
  private readonly probeEveryMs: number
  private failures = 0
  private down = false
  private nextProbeMs = 0
  /** Decisions answered from the over-limit cache (for metrics and tests). */
  cachedRefusals = 0
  /**
   * SPEC §5: each month's count as the store last showed it (one entry per team's month in
   * force): the fallback starts there, so a team known to be used up stays refused while the
   * store does not answer.
   */
  private readonly monthUsed = new Map<string, number>()

  constructor(
    private readonly inner: Windows,
    private readonly opts: GuardedStoreOptions
  ) {
    this.fallback = opts.fallback
    this.clock = opts.clock
    this.overLimit = opts.overLimitCache === false ? null : new OverLimitCache()
    this.failuresToTrip = opts.failuresToTrip ?? 3
    this.probeEveryMs = opts.probeEveryMs ?? 1000
  }

  /** Whether the breaker holds the store for down (readiness, tests). */
  get isDown(): boolean {
    return this.down
  }

  /**
   * A refusal from the over-limit cache, and the local limiter's answer while the store is
   * down between probes, are answered now (no store call, no promise); the rest ask the store.
   */
  consume(
    charges: readonly Charge[],
    nowMs: number,
    opts?: ConsumeOptions
  ): Decision | Promise<Decision> {
    const cached = this.overLimit?.check(charges, nowMs) ?? null
    if (cached !== null) {
      this.cachedRefusals++
      this.opts.observe?.cached()
      return cached
    }
    if (this.down && this.clock.monotonic() < this.nextProbeMs)
      return this.unanswered(charges, nowMs, null)
    return this.ask(charges, nowMs, opts)
  }

  private async ask(
    charges: readonly Charge[],
    nowMs: number,
    opts?: ConsumeOptions
  ): Promise<Decision> {
    if (this.down) this.nextProbeMs = this.clock.monotonic() + this.probeEveryMs
    const started = this.clock.monotonic()
    try {
      const d = await this.inner.consume(charges, nowMs, opts)
      this.opts.observe?.call((this.clock.monotonic() - started) / 1000, true)
      this.failures = 0
      if (this.down) this.markDown(false)
      this.overLimit?.learn(charges, d, nowMs)
      this.learnMonths(charges, d)
      return d
    } catch (err) {
      if (!(err instanceof StoreError)) throw err
      this.opts.observe?.call((this.clock.monotonic() - started) / 1000, false, err)
      this.failures++
      if (!this.down && this.failures >= this.failuresToTrip) this.markDown(true, err)
      return this.unanswered(charges, nowMs, err)
    }
  }

  private learnMonths(charges: readonly Charge[], d: Decision): void {
    for (let i = 0; i < charges.length; i++) {
      const c = charges[i]!
      if (c.kind !== 'monthly' || d.windows[i]!.unknown) continue
      // A new month's key replaces the old one: the map holds one month per team.
      if (!this.monthUsed.has(c.key) && this.monthUsed.size > 10_000) this.monthUsed.clear()
      this.monthUsed.set(c.key, d.windows[i]!.used)
    }
  }

  /**
   * A call the store did not answer: the local limiter (open) or the error (closed). Its
   * months start from what the store last showed; its decision says it is local (its monthly
   * charge is owed to the shared ledger, SPEC §5).
   */
  private unanswered(
    charges: readonly Charge[],
    nowMs: number,
    err: StoreError | null
  ): Decision | Promise<never> {
    if (this.opts.onError === 'closed')
      return Promise.reject(err ?? new StoreError('the store is down'))
    this.opts.observe?.fallback()
    for (const c of charges) {
      const known = c.kind === 'monthly' ? this.monthUsed.get(c.key) : undefined
      if (known !== undefined && c.kind === 'monthly') this.fallback.seedMonth(c, known)
    }
    const d = this.fallback.consumeSync(charges, nowMs)
    d.local = true
    if (err?.inDoubt !== undefined) d.inDoubt = err.inDoubt
    return d
  }

  /**
   * Calls go back while the store answers. One that cannot (the store down) stays counted until
   * its bucket leaves the window: that can only refuse, never admit, a call.
   */
  async giveBack(uses: readonly GiveBack[]): Promise<void> {
    if (this.down) return
    try {
      await this.inner.giveBack(uses)
    } catch (err) {
      if (!(err instanceof StoreError)) throw err
    }
  }

  /** Usage reads go to the shared store; while it is down, to the local fallback. */
  async peek(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    try {
      return await this.inner.peek(charges, nowMs)
    } catch (err) {
      if (!(err instanceof StoreError) || this.opts.onError === 'closed') throw err
      return this.fallback.peek(charges, nowMs)
    }
  }

  private markDown(down: boolean, err?: unknown): void {
    this.down = down
    this.nextProbeMs = this.clock.monotonic() + this.probeEveryMs
    this.opts.onOutage?.(down, err)
  }

  async ready(): Promise<boolean> {
    const ok = await this.inner.ready()
    // A store that answers a ping is back: the next call need not wait for the probe.
    if (ok && this.down) this.nextProbeMs = 0
    return ok
  }

  async close(): Promise<void> {
    await this.inner.close()
    await this.fallback.close()
  }
}
