import type { Charge, Decision, LimiterStore, OnStoreError } from '../types.js'
import { MemoryStore } from './memory-store.js'
import { StoreError } from './store-error.js'

export interface GuardedStoreOptions {
  onError: OnStoreError
  /** Told once when the store fails and once when it answers again (not per request). */
  onOutage?: (down: boolean, err?: unknown) => void
}

/**
 * SPEC §1 store.on_error, as a decorator over the shared store: `open` answers from a local
 * in-memory limiter while the store fails (each instance then limits alone); `closed` lets
 * the StoreError through, and the gateway answers 503.
 */
export class GuardedStore implements LimiterStore {
  private readonly fallback = new MemoryStore()
  private down = false

  constructor(private readonly inner: LimiterStore, private readonly opts: GuardedStoreOptions) {}

  get isDown(): boolean {
    return this.down
  }

  async consume(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    try {
      const d = await this.inner.consume(charges, nowMs)
      if (this.down) this.markDown(false)
      return d
    } catch (err) {
      if (!(err instanceof StoreError)) throw err
      if (!this.down) this.markDown(true, err)
      if (this.opts.onError === 'closed') throw err
      return this.fallback.consumeSync(charges, nowMs)
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
