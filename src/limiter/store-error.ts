import type { CheckTag } from '../types.js'

/** The store could not answer (down, slow past store.timeout_ms, or refused the call). */
export class StoreError extends Error {
  override readonly name = 'StoreError'
  /**
   * A check that was written to the store and got no answer: it may have charged there (its
   * tag, check.lua's). SPEC §5: a call admitted meanwhile is owed to the ledger in doubt, and
   * written only if that check did not charge it.
   */
  inDoubt?: CheckTag
  constructor(message: string, options?: { cause?: unknown; inDoubt?: CheckTag }) {
    super(message, options)
    if (options?.inDoubt !== undefined) this.inDoubt = options.inDoubt
  }
}
