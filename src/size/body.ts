import type { IncomingMessage } from 'node:http'
import type { Readable } from 'node:stream'
import type { Config } from '../types.js'
import type { BodyCheck, SizeCheck } from './actions.js'
import type { BodyPace } from './body-pace.js'
import {
  heldThenRest,
  readHeldBody,
  type BufferBudget,
  type HeldBody,
  type HeldBound,
  type HeldLimits,
} from './body-buffer.js'
import {
  checkSize,
  listRowsRefusal,
  tooSlowMessage,
  fullMessage,
  readFields,
  type SizeContext,
  type SizeRefusal,
} from './check.js'

// The size room's one door for the request path: after the gate admitted a call, check its
// action's size limit and hand back what to forward. The forwarder knows nothing of sizes.

export type SizedBody =
  /** Forward: `body` to send (undefined: the request streams), `broken` for a dry-run's log. */
  | {
      kind: 'forward'
      body: Readable | Iterable<Buffer> | AsyncIterable<Buffer> | undefined
      broken: SizeRefusal | null
      release: () => void
      /** SPEC §8: of the fields the call asked about, those its JSON body names (null: not JSON). */
      fields?: ReadonlySet<string> | null
      /**
       * SPEC §4: the body still comes from the client as it is forwarded (the request streams,
       * or the rest of it does), so min_body_rate holds it; a body held whole is not paced.
       */
      paced: boolean
      /** The watch of a body read ahead: the rest keeps its average from the first byte. */
      pace?: BodyPace
    }
  | { kind: 'refused'; refusal: SizeRefusal; release: () => void }
  | { kind: 'aborted' }
  /** 503: the body could not be held (a bound, or the disk); nothing is charged for it. */
  | { kind: 'unavailable'; message: string; bound?: HeldBound }
  /** 408: not received whole within body_timeout_ms, or slower than min_body_rate; the connection closes. */
  | { kind: 'timeout'; message: string; why: 'body_timeout' | 'min_body_rate' }

export interface SizeDeps {
  budget: BufferBudget
  /** Told of every body that went to a temporary file. */
  onSpilled?: () => void
  /** How many processes share size_limits.buffer_bytes and spill_bytes (workers); each holds its share. */
  processes: number
  /** Where spilled bodies go (the gateway reads the OS's temporary directory once). */
  tmpDir: string
  /** The injected clock's timer (body_timeout_ms). */
  setTimer: (fn: () => void, ms: number) => () => void
  /** The injected clock's monotonic time (min_body_rate's held time). */
  now?: () => number
}

/** What the body step knows of the call: where it goes, who sends it, when its head came. */
export interface BodyCall {
  path: string
  query: string
  /** SPEC §6's client key (IPv6 by its prefix): one client holds at most its half. */
  client: string
  /** Milliseconds since the request's head arrived (body_timeout_ms runs from there). */
  sinceHeadMs: () => number
  /** SPEC §4: every check the head allows passed; the body is about to be read (100 Continue). */
  onHeadPassed?: () => void
  /**
   * SPEC §8: top-level fields of a JSON body the change history asks about (a call with no
   * size check): the body is then read and held as a checked one is, and forwarded as read.
   */
  fields?: readonly string[]
}

/**
 * This process's share of the held-body bounds (SPEC §4), from the snapshot in force: one
 * client's share of the two, and the last max_body_bytes of memory kept for newcomers (whole
 * in each process: a body is held by one process).
 */
export function heldLimitsOf(limits: Config['sizeLimits'], processes: number): HeldLimits {
  const share = Math.max(1, processes)
  const memoryBytes = Math.floor(limits.bufferBytes / share)
  const spillBytes = Math.floor(limits.spillBytes / share)
  return {
    memoryBytes,
    spillBytes,
    clientBytes: Math.floor((memoryBytes + spillBytes) * limits.clientShare),
    reserveBytes: Math.min(limits.maxBodyBytes, memoryBytes),
  }
}

const NOTHING = () => {}
/** Most calls: no size check, the request streams (one shared answer, nothing allocated). */
export const STREAMED: Extract<SizedBody, { kind: 'forward' }> = Object.freeze({
  kind: 'forward',
  body: undefined,
  broken: null,
  release: NOTHING,
  paced: true,
}) as Extract<SizedBody, { kind: 'forward' }>

function releaser(deps: SizeDeps, body: HeldBody | null): () => void {
  if (body === null) return NOTHING
  if (body.spilled) deps.onSpilled?.()
  return () => void body.release()
}

/**
 * SPEC §4's one check that reads no body: List Rows' `limit` query parameter. Synchronous, and
 * nothing is made for a call within the limit (the request path asks this first, for its own
 * list calls, and the body door only for calls that send a body).
 */
export function sizedQuery(config: Config, query: string): SizedBody {
  const broken = listRowsRefusal(query, config.sizeLimits.listRows)
  if (broken === null) return STREAMED
  if (config.mode === 'enforce') return { kind: 'refused', refusal: broken, release: NOTHING }
  return { kind: 'forward', body: undefined, broken, release: NOTHING, paced: true }
}

/**
 * SPEC §4 on an admitted call (a size-refused call has used its rate slot), given the check of
 * its action (`sizeCheckFor`, asked once by the caller). Synchronous where no body is read (no
 * check, or the list's `limit` query), so most calls take no extra turn.
 */
export function sizedBody(
  deps: SizeDeps,
  req: IncomingMessage,
  config: Config,
  check: SizeCheck | null,
  at: BodyCall
): SizedBody | Promise<SizedBody> {
  if (check === null) {
    if (at.fields !== undefined) return bodySized(deps, req, config, null, at)
    return config.upstream.bufferRequestBytes > 0 ? readAhead(deps, req, config, at) : STREAMED
  }
  if (check.counts === 'query') return sizedQuery(config, at.query)
  return bodySized(deps, req, config, check, at)
}

/**
 * SPEC §4 upstream.buffer_request_bytes: an unchecked body is read before an upstream
 * connection is taken (nginx's proxy_request_buffering): whole when it is that short, else its
 * first buffer_request_bytes, then the rest streams on (paced, the same watch). So a head that
 * sends no byte, or a slow sender of its first part, holds no connection to the server. What is
 * read is held within the held-body bounds (memory, then a temporary file); a body that cannot
 * be held is refused 503 as a checked one is (nothing forwarded, nothing charged).
 */
async function readAhead(
  deps: SizeDeps,
  req: IncomingMessage,
  config: Config,
  at: BodyCall
): Promise<SizedBody> {
  const limits = config.sizeLimits
  const read = await readHeldBody(req, {
    maxBytes: config.upstream.bufferRequestBytes,
    budget: deps.budget,
    limits: heldLimitsOf(limits, deps.processes),
    client: at.client,
    timeoutMs: null,
    minBodyRate: limits.minBodyRate,
    readAhead: true,
    dir: deps.tmpDir,
    onHeadPassed: at.onHeadPassed,
    setTimer: deps.setTimer,
    now: deps.now,
  })
  switch (read.kind) {
    case 'whole':
      return {
        kind: 'forward',
        body: read.body.chunks(),
        broken: null,
        release: releaser(deps, read.body),
        paced: false,
      }
    case 'too_large':
      return {
        kind: 'forward',
        body: heldThenRest(read.body, req),
        broken: null,
        release: releaser(deps, read.body),
        paced: true,
        pace: read.pace,
      }
    case 'full':
      return { kind: 'unavailable', message: fullMessage(read.bound), bound: read.bound }
    case 'failed':
      return { kind: 'unavailable', message: fullMessage(undefined) }
    case 'too_slow':
      return { kind: 'timeout', message: tooSlowMessage(limits.minBodyRate), why: 'min_body_rate' }
    default:
      // aborted (no clock bound and no cap apply to a read ahead: nothing else ends it).
      return { kind: 'aborted' }
  }
}

async function bodySized(
  deps: SizeDeps,
  req: IncomingMessage,
  config: Config,
  check: BodyCheck | null,
  at: BodyCall
): Promise<SizedBody> {
  const limits = config.sizeLimits
  const ctx: SizeContext = {
    limits,
    budget: deps.budget,
    held: heldLimitsOf(limits, deps.processes),
    client: at.client,
    timeoutMs: Math.max(0, limits.bodyTimeoutMs - at.sinceHeadMs()),
    enforce: config.mode === 'enforce',
    tmpDir: deps.tmpDir,
    onHeadPassed: at.onHeadPassed,
    setTimer: deps.setTimer,
  }
  const r =
    check === null ? await readFields(req, ctx, at.fields!) : await checkSize(check, req, ctx)
  switch (r.kind) {
    case 'aborted':
    case 'unavailable':
    case 'timeout':
      return r
    case 'refused':
      return { kind: 'refused', refusal: r.refusal, release: releaser(deps, r.body) }
    case 'pass': {
      const release = releaser(deps, r.body)
      const { broken, fields } = r
      if (r.body === null)
        return { kind: 'forward', body: undefined, broken, release, fields, paced: true }
      const body = r.rest ? heldThenRest(r.body, req, r.pending) : r.body.chunks()
      return { kind: 'forward', body, broken, release, fields, paced: r.rest }
    }
  }
}
