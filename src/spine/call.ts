import type { EventEmitter } from 'node:events'
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { Admission, DryRun, GateResult, Outcome, Pass, Refusal } from '../http/call.js'
import type { Begun } from '../observe/request-log.js'
import type { SlotTicket } from '../protect/protector.js'
import type { SizedBody } from '../size/body.js'

// One call's record, as it grows step by step (Kong's per-call context, Envoy's filter state):
// Arrived (made once as the request comes) → Passed (the gate admitted it) → Bodied (its body is
// known: held whole, or to stream). Each step takes the record of its floor and returns the next
// one or the Outcome of an answer it wrote, so no step needs to ask where it stands. What the
// call holds on the way (its key's place, its body, its upstream share, its slot) is in `held`,
// and one release() frees it on every exit, a thrown step included.

/** Where a call's answers of basegate's own go: a response, or an upgrade's raw socket. */
export interface Reply {
  /** Emits 'close' when the client goes (a wait for a slot, a share or a delay ends then). */
  readonly client: EventEmitter
  /** An error answer `{"error_msg": ...}`; returns its body's bytes. */
  json(status: number, message: string, headers: OutgoingHttpHeaders | null): number
  /** The gate's refusal (a bare 429 has no body); returns its body's bytes. */
  refusal(r: Refusal): number
  /** Whether anything of an answer was written already. */
  started(): boolean
  /** Cuts the client's connection (an answer that cannot be finished). */
  cut(): void
}

/** What a call holds while it goes on; release() frees each once. */
export interface Held {
  /** SPEC §9 key_in_flight: its key's place, by the admission that took it. */
  key: Admission | null
  /** SPEC §4: the held body's memory or temporary file. */
  body: (() => void) | null
  /** SPEC §4: its client's share of the upstream pool, by the client's key. */
  share: string | null
  /** SPEC §9: its slot at the server. */
  ticket: SlotTicket | null
  /** SPEC §4: an upgrade's place among the tunnels, until a tunnel takes it over. */
  tunnel: (() => void) | null
}

/** A call as it arrives: the access log's fields (Begun) and the transport's parts. */
export interface Arrived extends Begun {
  readonly req: IncomingMessage
  readonly reply: Reply
  readonly held: Held
  /** What the gate made of it: null until the gate ran (a line of a call that failed before). */
  gate: GateResult | null
  /** What a dry-run forwards anyway (a rule, a limit, a size). */
  dryRun: DryRun | null
  /** The API changes only its body shows (SPEC §8): set by the body step, added to the gate's. */
  bodyChanges: readonly string[]
  /** Its line was written: a later ending (a step throwing after it) writes nothing more. */
  ended: boolean
}

/** After the gate admitted it (or dry-run forwards it). */
export interface Passed extends Arrived {
  gate: Pass
}

/** The body to forward: held whole, or streamed from the request. */
export type ForwardBody = Extract<SizedBody, { kind: 'forward' }>

/** After its body step: what to send upstream. */
export interface Bodied extends Passed {
  body: ForwardBody
}

declare const slotHeld: unique symbol
/**
 * After its slot step: a slot at the server is held (SPEC §9). Only such a call may be
 * forwarded (forwardStep, the upgrade's tunnelStep ask for it), so a story that skips the slot
 * does not compile. A mark for the compiler alone: nothing is added to the record.
 */
export type Slotted = Passed & { readonly [slotHeld]: true }

/** What a step hands on: the next record, or the outcome of the answer it wrote. */
export type Next<T> = T | Outcome | Promise<T | Outcome>
/** What a story ends with. */
export type Ending = Outcome | Promise<Outcome>

/** Records carry `req`; an Outcome never does. */
function isOutcome<T>(x: T | Outcome): x is Outcome {
  return (x as { req?: unknown }).req === undefined
}

/**
 * Goes on with `then` when the step handed on a record; an outcome ends the story there.
 * Synchronous when the step was (a refusal decided without I/O takes no promise, issue #26).
 */
export function on<T>(next: Next<T>, then: (record: T) => Ending): Ending {
  if (next instanceof Promise) return next.then((r) => (isOutcome(r) ? r : then(r)))
  return isOutcome(next) ? next : then(next)
}

/** The record one floor up: the same object with its new field (records grow in place). */
export function grow<T extends Arrived, K extends string, V>(
  call: T,
  key: K,
  value: V
): T & Record<K, V> {
  ;(call as Record<string, unknown>)[key] = value
  return call as T & Record<K, V>
}

/** Nothing held yet (a fresh record per call). */
export function nothingHeld(): Held {
  return { key: null, body: null, share: null, ticket: null, tunnel: null }
}

/** The upstream time an outcome carries (the slot's release feeds `auto` with it). */
export function upstreamMsOf(o: Outcome): number | null {
  return 'upstreamMs' in o ? o.upstreamMs : null
}
