/** The store could not answer (down, slow past store.timeout_ms, or refused the call). */
export class StoreError extends Error {
  override readonly name = 'StoreError'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
  }
}
