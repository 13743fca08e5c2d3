import type { Clock } from '../clock.js'
import type { OutgoingHttpHeaders } from 'node:http'
import type { Config, Windows } from '../types.js'
import { chargedUses } from './give-back.js'
import type { Protector, SlotTicket } from './protector.js'
import type { SlotWait } from './slots.js'
import type { EventEmitter } from 'node:events'
import type { Admission } from '../http/call.js'

/** A call's slot: held ('granted', release it through `finished`), or none (shed, client gone). */
export interface SlotAnswer {
  ticket: SlotTicket
  result: SlotWait
  waitedMs: number
  /** Set when the call got no slot: whether the give-back took anything back. */
  givenBack?: boolean
}

// SPEC §9 on the request path, shared by plain calls and WebSocket upgrades: one key's share,
// a slot at the server, and the give-back of a call that never reached the server or that the
// server failed.

export const SHED_MESSAGE = 'the server is busy; try again shortly'
export const KEY_BUSY_MESSAGE = 'too many calls of this key are in progress'

export interface CallGuardDeps {
  protector: Protector
  store: Windows
  /** How long a call waited for its slot. */
  clock: Clock
  /** A give-back that failed (the store down): logged; the calls stay counted, which can only refuse. */
  onGiveBackError?: (err: unknown) => void
}

export class CallGuard {
  constructor(private readonly deps: CallGuardDeps) {}

  /**
   * Gives an admitted call back to every window that charged it: null when nothing was charged,
   * else a promise that never rejects (a refusal of ours awaits it, so the client's next call
   * already sees it).
   */
  private giveBack(admission: Admission): Promise<void> | null {
    const store = this.deps.store
    const uses = chargedUses(admission)
    if (uses.length === 0) return null
    return store.giveBack(uses).catch((err: unknown) => this.deps.onGiveBackError?.(err))
  }

  /** Gives an admitted call back now (a call answered before the server: SPEC §4's held-body 503); whether anything was charged. */
  giveBackNow(admission: Admission): Promise<boolean> {
    const back = this.giveBack(admission)
    return back === null ? Promise.resolve(false) : back.then(() => true)
  }

  /**
   * SPEC §9 key_in_flight: takes a place of the call's key (null, at once), or gives the call
   * back (not charged) and resolves to the 429's headers (`retry-after: 1`) and whether anything
   * was given back. Exempt calls are never counted.
   */
  enterKey(
    admission: Admission
  ): Promise<{ headers: OutgoingHttpHeaders; givenBack: boolean }> | null {
    const { cls, key } = admission.classification
    if (cls === 'exempt' || this.deps.protector.enterKey(key)) return null
    const back = this.giveBack(admission)
    const headers = { ...admission.headers, 'retry-after': '1' }
    return (back ?? Promise.resolve()).then(() => ({ headers, givenBack: back !== null }))
  }

  /** The call's place among its key's leaves (every exit after enterKey said ok). */
  leaveKey(admission: Admission): void {
    const { cls, key } = admission.classification
    if (cls !== 'exempt') this.deps.protector.leaveKey(key)
  }

  /**
   * A slot at the server for the call's class, waited for while `client` stays (its 'close'
   * cancels the wait). A call that gets none is given back before this settles. Synchronous
   * when a slot is free.
   */
  slot(admission: Admission, client: EventEmitter): SlotAnswer | Promise<SlotAnswer> {
    const ticket = this.deps.protector.slot(admission.classification.cls)
    if (ticket.result === 'granted') return { ticket, result: 'granted', waitedMs: 0 }
    return this.waitFor(admission, client, ticket, ticket.result)
  }

  private async waitFor(
    admission: Admission,
    client: EventEmitter,
    ticket: SlotTicket,
    pending: Promise<SlotWait>
  ): Promise<SlotAnswer> {
    const started = this.deps.clock.monotonic()
    const onClose = () => ticket.cancel()
    client.once('close', onClose)
    const result = await pending
    client.off('close', onClose)
    const waitedMs = this.deps.clock.monotonic() - started
    if (result === 'granted') return { ticket, result, waitedMs }
    const back = this.giveBack(admission)
    if (back !== null) await back
    return { ticket, result, waitedMs, givenBack: back !== null }
  }

  /**
   * The call came back from the server (or failed to reach it): under `charge.server_errors:
   * false` a 5xx, 502 or 504 is given back. Returns whether it was.
   */
  answered(admission: Admission, config: Config, status: number): boolean {
    if (status < 500 || config.charge.serverErrors) return false
    return this.giveBack(admission) !== null
  }

  /** The headers of a shed call's 503: the call's rate headers and when to come back. */
  shedHeaders(admission: Admission, config: Config): OutgoingHttpHeaders {
    const seconds = Math.max(1, Math.ceil(config.protect.queueMs / 1000))
    return { ...admission.headers, 'retry-after': String(seconds) }
  }
}
