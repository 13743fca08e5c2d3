import type { Clock } from '../clock.js'
import type { Logger } from './log.js'

// Issue #40 item 9: store trouble in the log has one shape, whatever part of basegate meets it
// (the day counts, the ledger's late calls, the upgrade report, the notices, the team changes):
// the store's address (password masked) and the socket's own error, no stack, at most once a
// minute per kind, and one line when it is over saying how long it lasted.

/** A kind is said again at most this often while it lasts. */
export const TROUBLE_EVERY_MS = 60_000

/** What an error says an operator can act on: the socket's code, else its first line. */
export function errorText(err: unknown, connectionError?: string): string {
  if (connectionError !== undefined) return connectionError
  const e = err as { code?: unknown; message?: unknown; cause?: { code?: unknown } } | null
  const code = e?.cause?.code ?? e?.code
  if (typeof code === 'string') return code
  const message = typeof e?.message === 'string' ? e.message : String(err)
  // ioredis's words for "the connection is closed" name an option, not the problem.
  if (message.includes("Stream isn't writeable")) return 'the connection to the store is closed'
  return message.split('\n')[0]!
}

interface Trouble {
  sinceMs: number
  saidMs: number
  count: number
}

export class TroubleLog {
  private readonly open = new Map<string, Trouble>()

  constructor(
    private readonly deps: {
      logger: Logger
      /** The store's address, password masked (limiter/redis-client.ts storeAddress). */
      store: string
      /** The store connection's last socket error, when there is one. */
      connectionError: () => string | undefined
      clock: Clock
    }
  ) {}

  /**
   * `what` failed with the store (`usage day counts could not be written`); `then` says what
   * becomes of it (`kept, and written when the store answers`).
   */
  failed(what: string, then: string, err: unknown): void {
    const now = this.deps.clock.monotonic()
    let t = this.open.get(what)
    if (t === undefined) this.open.set(what, (t = { sinceMs: now, saidMs: -Infinity, count: 0 }))
    t.count++
    if (now - t.saidMs < TROUBLE_EVERY_MS) return
    t.saidMs = now
    const error = errorText(err, this.deps.connectionError())
    this.deps.logger.warn(
      { store: this.deps.store, error, failures: t.count },
      `${what} (${this.deps.store}: ${error}); ${then}`
    )
  }

  /** `what` works with the store again: one line, with how long it did not. */
  back(what: string, done: string): void {
    const t = this.open.get(what)
    if (t === undefined) return
    this.open.delete(what)
    const awayS = Math.round((this.deps.clock.monotonic() - t.sinceMs) / 100) / 10
    this.deps.logger.info(
      { store: this.deps.store, away_s: awayS, failures: t.count },
      `${what}: the store answers again after ${awayS} s; ${done}`
    )
  }
}
