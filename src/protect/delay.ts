import type { Clock } from '../clock.js'
import type { EventEmitter } from 'node:events'
import type { IncomingMessage } from 'node:http'
import type { Gate } from '../http/gate.js'
import type { Protector } from './protector.js'
import type { GateResult, Refusal } from '../http/call.js'

/**
 * SPEC §9 delay_ms: how long a rate refusal must wait for its windows to admit again, when that
 * is within `delayMs`; null when it does not wait (no delay configured, a monthly window among
 * the refusing ones: monthly 429s never wait, or the wait is longer).
 */
export function delayMsOf(g: Refusal, delayMs: number): number | null {
  if (delayMs <= 0 || g.outcome.kind !== 'rate_limited') return null
  const d = g.admission?.decision
  if (d == null) return null
  const charges = g.admission!.classification.charges
  let at = 0
  for (let i = 0; i < charges.length; i++) {
    const c = charges[i]!
    const w = d.windows[i]!
    if (w.retryAtMs === 0 || (c.kind === 'rule' && c.dryRun)) continue
    if (c.kind === 'monthly') return null
    if (w.retryAtMs > at) at = w.retryAtMs
  }
  if (at === 0) return null
  // The bucket's end on the decision's clock, and a millisecond past it.
  const wait = at - d.nowMs + 1
  return wait <= delayMs ? Math.max(0, wait) : null
}

/** Waits `ms` on the clock; true when the client went away first (then at once). */
function sleepUnlessClosed(clock: Clock, res: EventEmitter, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const onClose = () => {
      timer.cancel()
      resolve(true)
    }
    const timer = clock.setTimer(() => {
      res.off('close', onClose)
      resolve(false)
    }, ms)
    res.once('close', onClose)
  })
}

export interface DelayDeps {
  gate: Gate
  protector: Protector
  clock: Clock
  /** Each delayed call's second check: admitted or refused (a metric). */
  onDelayed?: (result: 'admitted' | 'refused') => void
}

/**
 * SPEC §9 delay_ms: a refused call whose windows admit again within delay_ms (`waitMs`, from
 * delayMsOf: the caller asks it first, so a refusal that cannot wait costs no promise) waits
 * until then (at most 100 of a key at once) and is checked once more. Answers the result of
 * that check, the refusal itself when the key already has 100 waiting, or null when the client
 * went away while it waited; `onWaited` gets how long it waited.
 */
export function createDelayer(deps: DelayDeps) {
  const { gate, protector, clock } = deps
  return async function delayed(
    req: IncomingMessage,
    res: EventEmitter,
    g: Refusal,
    waitMs: number,
    onWaited: (ms: number) => void
  ): Promise<GateResult | null> {
    const key = g.admission?.classification.key
    if (key === undefined || !protector.startDelay(key)) return g
    const started = clock.monotonic()
    const left = await sleepUnlessClosed(clock, res, waitMs)
    onWaited(clock.monotonic() - started)
    if (left) {
      protector.endDelay(key, null)
      return null
    }
    const again = await gate(req)
    protector.endDelay(key, again.kind === 'pass')
    deps.onDelayed?.(again.kind === 'pass' ? 'admitted' : 'refused')
    return again
  }
}

/** SPEC §9 delay_ms's waiter, as the request path holds it. */
export type Delayer = ReturnType<typeof createDelayer>
