import type { ServerResponse } from 'node:http'
import type { Clock } from '../clock.js'
import type { GateDeps, GateResult, Outcome, Refusal } from '../http/call.js'
import { sendContinue } from '../http/continue.js'
import type { Gate } from '../http/gate.js'
import { bodyHistory, pendingFields } from '../http/history-check.js'
import type { Logger } from '../observe/log.js'
import type { Finish } from '../observe/request-log.js'
import { KEY_BUSY_MESSAGE, SHED_MESSAGE, type CallGuard } from '../protect/call-guard.js'
import { delayMsOf, type Delayer } from '../protect/delay.js'
import type { UpstreamShares } from '../protect/upstream-shares.js'
import { sizeCheckFor } from '../size/actions.js'
import { sizedBody, sizedQuery, STREAMED, type SizeDeps, type SizedBody } from '../size/body.js'
import type { Account } from './accounting.js'
import {
  grow,
  upstreamMsOf,
  type Arrived,
  type Bodied,
  type Next,
  type Passed,
  type Slotted,
} from './call.js'

// The steps of a call's story, each on the record of its floor (spine/call.ts). Plain requests
// (app.ts) and WebSocket upgrades (websocket.ts) run the same gate, key share and slot steps;
// only their forward differs. Every step that answers writes its answer and hands on the
// Outcome; the story's one ending (end) frees what the call holds and writes its line.

/** What the steps share: the gateway's parts, made once. */
export interface Flow {
  gateDeps: GateDeps
  clock: Clock
  logger: Logger
  gate: Gate
  finish: Finish
  guard: CallGuard
  /** SPEC §9 delay_ms: waits out a refusal's windows and asks the gate again. */
  delayed: Delayer
  sizeDeps: SizeDeps
  /** SPEC §4: each client's share of the upstream pool. */
  shares: UpstreamShares
  /** SPEC §5: what a call adds to the usage and the ledger, and its month's notices. */
  account: Account
}

/**
 * Frees what the call holds, each once: slot, upstream share, key's place, held body, tunnel
 * place. Each part is freed even when one before it throws (issue #48: a throw left the rest
 * held); a throw is logged, never passed on.
 */
export function release(call: Arrived, flow: Flow, upstreamMs: number | null): void {
  const h = call.held
  const { ticket, share, key, body, tunnel } = h
  h.ticket = null
  h.share = null
  h.key = null
  h.body = null
  h.tunnel = null
  if (ticket !== null)
    try {
      ticket.release(upstreamMs)
    } catch (err) {
      freeingFailed(flow, err)
    }
  if (share !== null)
    try {
      flow.shares.give(share)
    } catch (err) {
      freeingFailed(flow, err)
    }
  if (key !== null)
    try {
      flow.guard.leaveKey(key)
    } catch (err) {
      freeingFailed(flow, err)
    }
  if (body !== null)
    try {
      body()
    } catch (err) {
      freeingFailed(flow, err)
    }
  if (tunnel !== null)
    try {
      tunnel()
    } catch (err) {
      freeingFailed(flow, err)
    }
}

const freeingFailed = (flow: Flow, err: unknown) =>
  flow.logger.error({ err }, 'freeing what a call held failed')

/**
 * Every exit of every call: what it holds is freed, and its one line is written. Under its own
 * guard (issue #48): a throw while freeing, counting or writing the line is logged, never
 * leaves the rest undone, and never reaches the process.
 */
export function end(call: Arrived, flow: Flow, outcome: Outcome): void {
  if (call.ended) return
  call.ended = true
  release(call, flow, upstreamMsOf(outcome))
  try {
    flow.account(
      call.gate?.admission ?? null,
      call.givenBack,
      flow.clock.now(),
      call.method,
      call.gate?.path
    )
  } catch (err) {
    flow.logger.error({ err }, 'counting a call failed')
  }
  try {
    flow.finish(call.gate, call, outcome, call.dryRun, call.bodyChanges)
  } catch (err) {
    flow.logger.error({ err }, "writing a call's line failed")
  }
}

/**
 * A step threw (a bug): nothing may crash the process, and nothing the call holds may leak. The
 * client gets a 500 (or its connection cut, when an answer had begun), and the call its line.
 */
export function failed(call: Arrived, flow: Flow, err: unknown): void {
  flow.logger.error({ err }, 'request failed')
  try {
    if (!call.reply.started()) call.bytesOut = call.reply.json(500, 'internal error', null)
    else call.reply.cut()
  } catch {
    call.reply.cut()
  }
  end(call, flow, { kind: 'internal_error' })
}

/** Tells a story to its end: the ending's outcome, or the failure of a step that threw. */
export function tell<C extends Arrived>(
  call: C,
  flow: Flow,
  story: (call: C) => Next<Outcome>
): void {
  let ending: Next<Outcome>
  try {
    ending = story(call)
  } catch (err) {
    return failed(call, flow, err)
  }
  if (ending instanceof Promise)
    ending.then(
      (o) => end(call, flow, o),
      (err: unknown) => failed(call, flow, err)
    )
  else end(call, flow, ending)
}

// ---- the steps every transport runs ----

/** Normalise, classify, count (and wait out delay_ms): 400, 429, 410, 503. */
export function gateStep<C extends Arrived>(call: C, flow: Flow): Next<C & Passed> {
  // A decision made without I/O takes no closure.
  const g = flow.gate(call.req)
  return g instanceof Promise ? g.then((r) => judged(call, flow, r)) : judged(call, flow, g)
}

/** A pass goes on; a refusal is answered, unless SPEC §9 delay_ms lets it wait and ask again. */
function judged<C extends Arrived>(call: C, flow: Flow, g: GateResult): Next<C & Passed> {
  call.gate = g
  if (g.kind === 'pass') {
    call.dryRun = g.dryRun
    return grow(call, 'gate', g)
  }
  // Asked synchronously: the flood's refusals that cannot wait pay nothing for delay_ms.
  const waitMs = delayMsOf(g, flow.gateDeps.snapshot().config.rateLimits.delayMs)
  if (waitMs === null) return refused(call, g)
  const onWaited = (ms: number) => (call.delayedMs = ms)
  return flow.delayed(call.req, call.reply.client, g, waitMs, onWaited).then((again) => {
    if (again === null) return { kind: 'client_aborted', upstreamMs: null } as Outcome
    if (again.kind === 'refuse') return refused(call, again)
    return judged(call, flow, again)
  })
}

function refused(call: Arrived, g: Refusal): Outcome {
  call.gate = g
  call.bytesOut = call.reply.refusal(g)
  return g.outcome
}

/** SPEC §9 key_in_flight: one key's share of the server, held until the call is done (429, given back). */
export function keyShareStep<C extends Passed>(call: C, flow: Flow): Next<C> {
  const { admission } = call.gate
  const busy = flow.guard.enterKey(admission)
  if (busy === null) {
    call.held.key = admission
    return call
  }
  return busy.then(({ headers, givenBack }): Outcome => {
    call.givenBack = givenBack
    call.bytesOut = call.reply.json(429, KEY_BUSY_MESSAGE, headers)
    return { kind: 'key_in_flight' }
  })
}

/** SPEC §9: a slot at the server (the web UI's calls first; none within queue_ms: 503, given back). */
export function slotStep<C extends Passed>(call: C, flow: Flow): Next<C & Slotted> {
  const { admission, snapshot } = call.gate
  // Synchronous when a slot is free (always, without `protect`): no promise, no closure.
  const slot = flow.guard.slot(admission, call.reply.client)
  if (!(slot instanceof Promise)) {
    call.held.ticket = slot.ticket
    return call as C & Slotted
  }
  return slot.then((s): (C & Slotted) | Outcome => {
    if (s.result === 'granted') {
      call.held.ticket = s.ticket
      return call as C & Slotted
    }
    call.givenBack = s.givenBack === true
    if (s.result === 'cancelled') return { kind: 'client_aborted', upstreamMs: null }
    const headers = flow.guard.shedHeaders(admission, snapshot.config)
    call.bytesOut = call.reply.json(503, SHED_MESSAGE, headers)
    return { kind: 'shed', waitedMs: s.waitedMs }
  })
}

// ---- the steps of a plain request ----

/** A plain request's record: it has a response to write to. */
export interface HttpArrived extends Arrived {
  readonly res: ServerResponse
}

/** SPEC §4 and §8: the body the checks and the history need, read by size/ (or streamed). */
export function bodyStep<C extends Passed & HttpArrived>(call: C, flow: Flow): Next<C & Bodied> {
  const pass = call.gate
  const { req, res } = call
  const check = sizeCheckFor(call.method, pass.route)
  // Most calls read no body: they take nothing here (no per-call object, no closure); a List
  // Rows call has its query checked, still without one.
  if (pass.pendingHistory.length === 0) {
    if (check === null && !hasBody(req.headers)) return grow(call, 'body', STREAMED)
    if (check !== null && check.counts === 'query')
      return bodyRead(call, flow, sizedQuery(pass.snapshot.config, pass.query))
  }
  const sized = sizedBody(flow.sizeDeps, req, pass.snapshot.config, check, {
    path: pass.route,
    query: pass.query,
    client: pass.snapshot.clientIp.keyOf(pass.admission.clientIp),
    sinceHeadMs: () => flow.clock.monotonic() - call.startedMs,
    onHeadPassed: () => sendContinue(req, res),
    fields: pendingFields(pass),
  })
  return sized instanceof Promise
    ? sized.then((s) => bodyRead(call, flow, s))
    : bodyRead(call, flow, sized)
}

function hasBody(headers: { 'content-length'?: string; 'transfer-encoding'?: string }): boolean {
  const cl = headers['content-length']
  return headers['transfer-encoding'] !== undefined || (cl !== undefined && cl !== '0')
}

/** What the body step said: the body to forward, or an answer of ours. */
function bodyRead<C extends Passed & HttpArrived>(
  call: C,
  flow: Flow,
  sized: SizedBody
): Next<C & Bodied> {
  const { req, res, reply } = call
  const { admission } = call.gate
  switch (sized.kind) {
    case 'aborted':
      return { kind: 'client_aborted', upstreamMs: null }
    case 'unavailable':
      // SPEC §4: a body that could not be held is not forwarded and not charged.
      return flow.guard.giveBackNow(admission).then((givenBack): Outcome => {
        call.givenBack = givenBack
        const headers = { ...admission.headers, 'retry-after': '1', connection: 'close' }
        call.bytesOut = reply.json(503, sized.message, headers)
        return { kind: 'body_unavailable', message: sized.message, bound: sized.bound }
      })
    case 'timeout': {
      // SPEC §4 body_timeout_ms, min_body_rate: the connection closes; its held bytes were freed already.
      res.once('finish', () => req.socket.destroy())
      const headers = { ...admission.headers, connection: 'close' }
      call.bytesOut = reply.json(408, sized.message, headers)
      return { kind: 'body_timeout', message: sized.message, why: sized.why }
    }
    case 'refused': {
      call.held.body = sized.release
      // SPEC §4: nothing of the call reached the server. A body left unread closes the connection.
      res.setHeader('connection', 'close')
      const r = sized.refusal
      call.bytesOut = reply.json(r.status, r.message, admission.headers)
      return { kind: 'size_refused', ...r }
    }
    case 'forward':
      call.held.body = sized.release
      if (sized.broken !== null) call.dryRun = { ...call.dryRun, size: sized.broken }
      if (sized.fields !== undefined)
        call.bodyChanges = bodyHistory(flow.gateDeps, call.gate, call.method, sized.fields)
      return grow(call, 'body', sized)
  }
}

/**
 * SPEC §4: one of the client's own upstream connections (its share of the pool; the last share
 * is kept for clients that hold none), the first class in protect.priority first among its
 * waiting calls. None within protect.queue_ms: 503 saying which bound (its own share, or the
 * pool), given back; a client that leaves while it waits is given back too.
 */
export function poolStep<C extends Bodied & HttpArrived>(call: C, flow: Flow): Next<C> {
  const { admission, snapshot } = call.gate
  const client = snapshot.clientIp.keyOf(admission.clientIp)
  const share = flow.shares.take(client, admission.classification.cls, call.reply.client)
  if (share === 'granted') {
    call.held.share = client
    return call
  }
  return share.then(async (w): Promise<C | Outcome> => {
    if (w === 'granted') {
      call.held.share = client
      return call
    }
    call.givenBack = await flow.guard.giveBackNow(admission)
    if (w === 'cancelled') return { kind: 'client_aborted', upstreamMs: null }
    const headers = flow.guard.shedHeaders(admission, snapshot.config)
    call.bytesOut = call.reply.json(503, w === 'own' ? SHARE_MESSAGE : POOL_MESSAGE, headers)
    return { kind: 'upstream_share' }
  })
}

export const SHARE_MESSAGE =
  "this client's connections to the server are all in use (upstream.max_connections_per_client); try again shortly"
export const POOL_MESSAGE =
  "the gateway's connections to the server are all in use (upstream.max_connections); try again shortly"
