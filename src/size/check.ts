import type { IncomingMessage } from 'node:http'
import type { SizeLimits } from '../types.js'
import { limitFor, type BodyCheck, type SizeLimitName } from './actions.js'
import {
  readHeldBody,
  type BodyRead,
  type BufferBudget,
  type HeldBody,
  type HeldBound,
  type HeldLimits,
  type ReadOptions,
} from './body-buffer.js'
import { duplicateBodyHeader, headEncodingRefusal } from './encoding.js'
import { arrayElement, eachArrayElement, JsonBodyScanner, JsonSyntaxError } from './json-count.js'
import { formFields, formKindOf } from './form-fields.js'
import { sqlRowLimit, type SqlLimit } from './sql-limit.js'

// SPEC §4 on one request: count what the action's limit counts, from the query or from the
// body read whole (and held as raw bytes) before anything of the call is forwarded.

/** A broken size rule: refused (enforce), or logged and forwarded (dry-run). */
export interface SizeRefusal {
  status: 400 | 413 | 415
  message: string
  limitName?: SizeLimitName
  count?: number
}

export type SizeResult =
  /**
   * Forward the call. `body` is the held body (null: nothing was read, the request streams);
   * `rest` says the request stream still has bytes after it (dry-run past max_body_bytes);
   * `broken` is the rule a dry-run forwards anyway.
   */
  | {
      kind: 'pass'
      body: HeldBody | null
      rest: boolean
      broken: SizeRefusal | null
      /** readFields: the fields asked about that the body names (null: not a JSON object). */
      fields?: ReadonlySet<string> | null
      /** With `rest`: a chunk read but not held, sent between the held bytes and the rest. */
      pending?: Buffer
    }
  | { kind: 'refused'; refusal: SizeRefusal; body: HeldBody | null }
  | { kind: 'aborted' }
  /** The body could not be held (the temporary file failed, or it would pass a bound): 503, not charged. */
  | { kind: 'unavailable'; message: string; bound?: HeldBound }
  /** SPEC §4 body_timeout_ms or min_body_rate: not received in time: 408, the connection closes. */
  | { kind: 'timeout'; message: string; why: 'body_timeout' | 'min_body_rate' }

export interface SizeContext {
  limits: SizeLimits
  budget: BufferBudget
  /** This process's share of size_limits.buffer_bytes and spill_bytes, and one client's half. */
  held: HeldLimits
  /** Who holds the body (SPEC §6's client key). */
  client: string
  /** What is left of size_limits.body_timeout_ms since the request's head arrived. */
  timeoutMs: number
  /** enforce refuses; dry-run forwards and reports. */
  enforce: boolean
  /** Where spilled bodies go (the OS's temporary directory by default). */
  tmpDir?: string
  /** Every check the head allows passed: the body is about to be read (SPEC §4: 100 Continue). */
  onHeadPassed?: () => void
  /** The injected clock's timer (body_timeout_ms). */
  setTimer: (fn: () => void, ms: number) => () => void
}

const PLAIN_INT = /^[0-9]+$/

export function sizeErrorMessage(name: SizeLimitName, count: number, limit: number): string {
  const what = name === 'list_rows' || name === 'sql_list' ? 'rows requested' : 'rows in the body'
  return `${name} is ${limit}: ${count} ${what} is over it`
}

function tooMany(name: SizeLimitName, count: number, limit: number): SizeRefusal {
  return { status: 400, message: sizeErrorMessage(name, count, limit), limitName: name, count }
}

const invalid = (message: string): SizeRefusal => ({ status: 400, message })

/**
 * list rows: the `limit` query parameter. Only a plain decimal integer (after
 * percent-decoding) is a limit: the server's parser reads `+5000`, ` 5000`, `5_000`, `5000.0`
 * or full-width digits as 5000, so anything else is refused rather than passed uncounted.
 * Repeated: every value must be plain, and the largest counts.
 */
export function listRowsRefusal(query: string, limit: number): SizeRefusal | null {
  if (query.length < 2) return null
  const values = new URLSearchParams(query.slice(1)).getAll('limit')
  let max = -1
  for (const v of values) {
    if (!PLAIN_INT.test(v)) {
      return invalid(
        `the query parameter limit=${JSON.stringify(v)} is not a plain non-negative integer`
      )
    }
    max = Math.max(max, Number(v))
  }
  return max > limit ? tooMany('list_rows', max, limit) : null
}

/** A body that is not what the action takes, or breaks its limit; null when it passes. */
type Judge = (body: HeldBody) => Promise<SizeRefusal | null>

/** The scanner for one check (none for a form), and how to judge the body once it was read whole. */
function scannerFor(
  check: BodyCheck,
  limit: number,
  contentType: string | undefined
): { scanner: JsonBodyScanner | null; judge: Judge } {
  if (check.counts === 'array') {
    const { field } = check
    const scanner = new JsonBodyScanner({ count: field })
    return {
      scanner,
      judge: async () => {
        const r = scanner.end()
        if (r.kind === 'count') return r.count > limit ? tooMany(check.name, r.count, limit) : null
        if (r.kind === 'not_object') return invalid('the body must be a JSON object')
        return invalid(`the body must be a JSON object with an array "${field}"`)
      },
    }
  }
  if (formKindOf(contentType) !== null) {
    return { scanner: null, judge: (body) => judgeSqlForm(body, contentType!, limit) }
  }
  const scanner = new JsonBodyScanner({ count: null, capture: ['sql', 'parameters'] })
  return { scanner, judge: (body) => judgeSql(scanner, body, limit) }
}

function sqlRefusal(r: SqlLimit, limit: number): SizeRefusal | null {
  if (r.kind === 'invalid') return invalid(r.message)
  return r.kind === 'count' && r.count > limit ? tooMany('sql_list', r.count, limit) : null
}

/**
 * A form body (dtable-web-api's querySql posts multipart): every `sql` field counts, the
 * largest wins (servers differ on which of two fields they read: Django the last, Go the
 * first); `parameters`, when given, is a JSON list in a field.
 */
async function judgeSqlForm(
  body: HeldBody,
  contentType: string,
  limit: number
): Promise<SizeRefusal | null> {
  const fields = await formFields(body, contentType, ['sql', 'parameters'])
  if ('error' in fields) return { status: fields.status ?? 400, message: fields.error }
  const sqls = fields.get('sql')!
  if (sqls.length === 0) return invalid('the form must have a field "sql"')
  let params: unknown = undefined
  const p = fields.get('parameters')!.at(-1)
  if (p !== undefined) {
    try {
      params = JSON.parse(p)
    } catch {
      return invalid('the form field "parameters" is not a JSON list')
    }
  }
  let worst: SizeRefusal | null = null
  for (const sql of sqls) {
    const r = sqlRefusal(sqlRowLimit(sql, params), limit)
    if (r === null) continue
    if (r.count === undefined) return r // not a plain integer: refused whatever the rest says
    if (worst === null || r.count > worst.count!) worst = r
  }
  return worst
}

async function judgeSql(
  scanner: JsonBodyScanner,
  body: HeldBody,
  limit: number
): Promise<SizeRefusal | null> {
  const shape = scanner.end()
  const at = scanner.spans.get('sql')
  if (shape.kind === 'not_object' || at === undefined)
    return invalid('the body must be a JSON object with a string "sql"')
  const sql: unknown = JSON.parse((await body.slice(at.start, at.end)).toString('utf8'))
  if (typeof sql !== 'string') return invalid('the body must have a string "sql"')
  const p = scanner.spans.get('parameters')
  // Only a `?` can read a parameter; the list's bytes are read, never parsed whole.
  const params = p === undefined || !sql.includes('?') ? null : await body.slice(p.start, p.end)
  const isList = params !== null && params[0] === 0x5b
  const r = sqlRowLimit(sql, {
    at: (i: number): unknown => (isList ? arrayElement(params, i) : undefined),
    each: (fn: (v: unknown) => void) => {
      if (!isList) return
      eachArrayElement(params, (el) => {
        fn(JSON.parse(el.toString('utf8')))
        return false
      })
    },
  })
  return sqlRefusal(r, limit)
}

/** SPEC §4 size checks on one request: count, compare, and hold the body to forward. */
export async function checkSize(
  check: BodyCheck,
  req: IncomingMessage,
  ctx: SizeContext
): Promise<SizeResult> {
  // SPEC §4: a body the counters cannot read as the server would is refused from its head:
  // two of a header that frames or types it (servers disagree on which one counts), a charset,
  // a content coding.
  const encoding = duplicateBodyHeader(req.rawHeaders) ?? headEncodingRefusal(req.headers)
  if (encoding !== null) {
    if (ctx.enforce) return { kind: 'refused', refusal: encoding, body: null }
    return { kind: 'pass', body: null, rest: false, broken: encoding }
  }
  const limit = limitFor(check.name, ctx.limits)
  const { scanner, judge } = scannerFor(check, limit, req.headers['content-type'])
  let early: SizeRefusal | null = null
  const read = await readHeldBody(req, {
    ...readOptions(ctx),
    onChunk: (chunk) => {
      if (early !== null || scanner === null) return true // dry-run reads on, to forward it whole
      try {
        scanner.write(chunk)
        if (check.counts === 'array' && scanner.current > limit)
          early = tooMany(check.name, scanner.current, limit)
      } catch (err) {
        if (!(err instanceof JsonSyntaxError)) throw err
        early = invalid(err.message)
      }
      return early === null || !ctx.enforce
    },
  })
  if (read.kind === 'stopped') return { kind: 'refused', refusal: early!, body: read.body }
  if (read.kind !== 'whole') return notWhole(read, ctx)
  let broken: SizeRefusal | null = early
  if (broken === null) {
    try {
      broken = await judge(read.body)
    } catch (err) {
      if (!(err instanceof JsonSyntaxError)) throw err
      broken = invalid(err.message)
    }
  }
  if (broken === null || !ctx.enforce) return { kind: 'pass', body: read.body, rest: false, broken }
  return { kind: 'refused', refusal: broken, body: read.body }
}

/**
 * SPEC §8: a body the change history asks about (Move Rows to Big Data without `view_name`),
 * held like a checked one (within buffer_bytes, spilled past it, bounded, timed): which of
 * `fields` its top-level JSON object names. `fields` is null when it is not a JSON object or
 * too large to look at: the server judges it, and the call is forwarded as it came.
 */
export async function readFields(
  req: IncomingMessage,
  ctx: SizeContext,
  fields: readonly string[]
): Promise<SizeResult> {
  const scanner = new JsonBodyScanner({ count: null, capture: fields })
  let json = true
  // Not a checked body (SPEC §4 gives 503 and body_timeout_ms to those): what cannot be held is
  // streamed on, and only min_body_rate applies to it, as to any streamed body.
  const read = await readHeldBody(req, {
    ...readOptions(ctx),
    timeoutMs: null,
    overflow: 'stream',
    onChunk: (chunk) => {
      if (!json) return true
      try {
        scanner.write(chunk)
      } catch (err) {
        if (!(err instanceof JsonSyntaxError)) throw err
        json = false
      }
      return true
    },
  })
  if (read.kind === 'too_large')
    return { kind: 'pass', body: read.body, rest: true, broken: null, fields: null }
  if (read.kind === 'unheld')
    return {
      kind: 'pass',
      body: read.body,
      rest: true,
      broken: null,
      fields: null,
      pending: read.pending,
    }
  if (read.kind !== 'whole' && read.kind !== 'stopped')
    return notWhole(read, { ...ctx, enforce: false })
  let named: ReadonlySet<string> | null = null
  if (json) {
    try {
      if (scanner.end().kind !== 'not_object') named = new Set(scanner.spans.keys())
    } catch (err) {
      if (!(err instanceof JsonSyntaxError)) throw err
    }
  }
  return { kind: 'pass', body: read.body, rest: false, broken: null, fields: named }
}

function readOptions(ctx: SizeContext): ReadOptions {
  return {
    maxBytes: ctx.limits.maxBodyBytes,
    budget: ctx.budget,
    limits: ctx.held,
    client: ctx.client,
    timeoutMs: ctx.timeoutMs,
    minBodyRate: ctx.limits.minBodyRate,
    dir: ctx.tmpDir,
    onHeadPassed: ctx.onHeadPassed,
    setTimer: ctx.setTimer,
  }
}

/** A read that did not end whole: the client left, a bound, the clock, the disk, or the cap. */
function notWhole(
  read: Exclude<BodyRead, { kind: 'whole' | 'stopped' }>,
  ctx: SizeContext
): SizeResult {
  switch (read.kind) {
    case 'aborted':
      return read
    case 'unheld':
      // Only a read told to stream what it cannot hold ends so (readFields answers it itself).
      throw new Error('a checked body was read to be streamed')
    case 'too_slow':
      return {
        kind: 'timeout',
        message: tooSlowMessage(ctx.limits.minBodyRate),
        why: 'min_body_rate',
      }
    case 'failed':
      return {
        kind: 'unavailable',
        message: `the request body could not be held for its size check (${codeOf(read.error)}); try again shortly`,
      }
    case 'full':
      return { kind: 'unavailable', message: fullMessage(read.bound), bound: read.bound }
    case 'timeout':
      return {
        kind: 'timeout',
        message: `the request body did not arrive whole within body_timeout_ms (${ctx.limits.bodyTimeoutMs} ms)`,
        why: 'body_timeout',
      }
    case 'too_large': {
      const refusal: SizeRefusal = {
        status: 413,
        message: `the body is over max_body_bytes (${ctx.limits.maxBodyBytes} bytes)`,
      }
      if (ctx.enforce) return { kind: 'refused', refusal, body: read.body }
      return { kind: 'pass', body: read.body, rest: true, broken: refusal }
    }
  }
}

/** SPEC §4: which bound a held body would pass, said to the client (its 503's error_msg). */
export function fullMessage(bound: HeldBound | undefined): string {
  if (bound === undefined)
    return 'the request body could not be held (its temporary file failed); try again shortly'
  return bound === 'client_share'
    ? "this client's request bodies held before forwarding are at their bound (size_limits.client_share of buffer_bytes + spill_bytes); try again shortly"
    : 'request bodies held before forwarding are at their bound (size_limits.buffer_bytes + spill_bytes); try again shortly'
}

/** SPEC §4 min_body_rate, said to the client (its 408's error_msg). */
export function tooSlowMessage(rate: number): string {
  return `the request body arrived slower than min_body_rate (${rate} bytes/s on average since its first byte)`
}

function codeOf(err: Error): string {
  return (err as { code?: string }).code ?? err.message
}
