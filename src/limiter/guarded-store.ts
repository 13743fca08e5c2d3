import type { Charge, Decision, LimiterStore, OnStoreError } from '../types.js'
import { MemoryStore } from './memory-store.js'
import { OverLimitCache } from './over-limit-cache.js'
import { StoreError } from './store-error.js'

export interface GuardedStoreOptions {
  onError: OnStoreError
  /** Told once when the store fails and once when it answers again (not per request). */
  onOutage?: (down: boolean, err?: unknown) => void
  /** Answer known-full windows from memory (default true). */
  overLimitCache?: boolean
  /** Metrics hooks. */
  observe?: { call(seconds: number, ok: boolean): void; fallback(): void; cached(): void }
}

/**
 * Resilience around the shared store, as a decorator:
 * - the local over-limit cache answers floods on a full window without a store round trip;
 * - SPEC §1 store.on_error: `open` answers from a local in-memory limiter while the store
 *   fails (each instance then limits alone); `closed` lets the StoreError through, and the
 *   gateway answers 503.
 */
export class GuardedStore implements LimiterStore {
  private readonly fallback = new MemoryStore()
  private readonly overLimit: OverLimitCache | null
  private down = false
  /** Decisions answered from the over-limit cache (for metrics and tests). */
  cachedRefusals = 0

  constructor(
    private readonly inner: LimiterStore,
    private readonly opts: GuardedStoreOptions
  ) {
    this.overLimit = opts.overLimitCache === false ? null : new OverLimitCache()
  }

  async consume(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    const cached = this.overLimit?.check(charges, nowMs) ?? null
    if (cached !== null) {
      this.cachedRefusals++
      this.opts.observe?.cached()
      return cached
    }
    const started = performance.now()
    try {
      const d = await this.inner.consume(charges, nowMs)
      this.opts.observe?.call((performance.now() - started) / 1000, true)
      if (this.down) this.markDown(false)
      this.overLimit?.learn(charges, d, nowMs)
      return d
    } catch (err) {
      if (!(err instanceof StoreError)) throw err
      this.opts.observe?.call((performance.now() - started) / 1000, false)
      if (!this.down) this.markDown(true, err)
      if (this.opts.onError === 'closed') throw err
      this.opts.observe?.fallback()
      return this.fallback.consumeSync(charges, nowMs)
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
    this.opts.onOutage?.(down, err)
  }

  ready(): Promise<boolean> {
    return this.inner.ready()
  }

  async close(): Promise<void> {
    await this.inner.close()
    await this.fallback.close()
  }
}
