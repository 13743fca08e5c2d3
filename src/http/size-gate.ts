import type { IncomingMessage } from 'node:http'
import { Transform, type Readable, type TransformCallback } from 'node:stream'
import type { SizeLimits } from '../types.js'
import { JsonArrayCounter, JsonSyntaxError } from './json-array-count.js'
import { readJsonBody } from './read-body.js'
import {
  countListRows,
  countSqlRows,
  limitFor,
  sizeErrorMessage,
  type Count,
  type SizeCheck,
  type SizeLimitName,
} from './size-limits.js'

/** A broken size rule: refused in enforce mode, logged in dry-run. */
export interface SizeRefusal {
  status: 400 | 413
  message: string
  limitName?: SizeLimitName
  count?: number
}

/** Raised in a streamed body when it breaks a rule: the forwarder answers with it (not 502). */
export class SizeViolation extends Error {
  constructor(readonly refusal: SizeRefusal) {
    super(refusal.message)
  }
}

export interface SizeOutcome {
  /** The body to forward: read whole (SQL), or streamed through the counter (rows). */
  body?: Buffer | Readable
  /** Known before forwarding (query, SQL, a declared length over the cap). */
  refusal?: SizeRefusal
  /** Streamed bodies: the rule the body broke, known once it was read (dry-run logs it). */
  streamed?: { violation(): SizeRefusal | null }
  /** The client went away while its body was read. */
  aborted?: boolean
}

function overCap(limits: SizeLimits): SizeRefusal {
  return { status: 413, message: `the body is over max_body_bytes (${limits.maxBodyBytes} bytes)` }
}

/**
 * The rows endpoints' body, counted as it streams to the upstream. Each chunk is held back
 * until the next one was scanned, and the last until the whole body proved valid and under
 * the limit: a body that breaks a rule never reaches the upstream whole, so the upstream never
 * acts on it. Memory: one chunk and the scanner's nesting stack, whatever the body's size.
 */
function countingStream(
  req: IncomingMessage,
  field: string,
  name: SizeLimitName,
  limit: number,
  limits: SizeLimits,
  enforce: boolean
) {
  const counter = new JsonArrayCounter(field)
  let bytes = 0
  let held: Buffer | null = null
  let violation: SizeRefusal | null = null
  const note = (r: SizeRefusal): boolean => {
    violation ??= r
    return enforce
  }
  const tooMany = (n: number) => ({
    status: 400 as const,
    message: sizeErrorMessage(name, n, limit),
    limitName: name,
    count: n,
  })
  const judge = (end: boolean): SizeRefusal | null => {
    if (violation !== null) return null
    try {
      if (!end) return counter.current > limit ? tooMany(counter.current) : null
      const r = counter.end()
      if (r.kind === 'count') return r.count > limit ? tooMany(r.count) : null
      const why = r.kind === 'not_object' ? 'a JSON object' : `an array "${field}"`
      return {
        status: 400,
        message: `the body must be ${r.kind === 'not_object' ? why : `a JSON object with ${why}`}`,
      }
    } catch (err) {
      if (err instanceof JsonSyntaxError) return { status: 400, message: err.message }
      throw err
    }
  }
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      bytes += chunk.length
      if (violation === null && bytes > limits.maxBodyBytes && note(overCap(limits)))
        return cb(new SizeViolation(violation!))
      if (violation === null) {
        let r: SizeRefusal | null
        try {
          counter.write(chunk)
          r = judge(false)
        } catch (err) {
          if (!(err instanceof JsonSyntaxError)) throw err
          r = { status: 400, message: err.message }
        }
        if (r !== null && note(r)) return cb(new SizeViolation(r))
      }
      if (held !== null) this.push(held)
      held = chunk
      cb()
    },
    flush(cb: TransformCallback) {
      const r = judge(true)
      if (r !== null && note(r)) return cb(new SizeViolation(r))
      if (held !== null) this.push(held)
      cb()
    },
  })
  req.on('aborted', () =>
    t.destroy(Object.assign(new Error('client aborted'), { code: 'ECONNRESET' }))
  )
  req.pipe(t)
  return { body: t, violation: () => violation }
}

/** SPEC §4 size checks on one request: count, compare, and hand back the body to forward. */
export async function checkSize(
  check: SizeCheck,
  req: IncomingMessage,
  query: string,
  limits: SizeLimits,
  opts: { keepRestForDryRun: boolean }
): Promise<SizeOutcome> {
  const limit = limitFor(check.name, limits)
  if (!check.needsBody) return judge(countListRows(query), check.name, limit, {})
  const declared = req.headers['content-length']
  if (declared !== undefined && Number(declared) > limits.maxBodyBytes && !opts.keepRestForDryRun) {
    return { refusal: overCap(limits) }
  }
  if (check.field !== null) {
    const s = countingStream(req, check.field, check.name, limit, limits, !opts.keepRestForDryRun)
    return { body: s.body, streamed: { violation: s.violation } }
  }
  // SQL: a statement is small; the body is read (up to the cap) to find `sql` and `parameters`.
  const read = await readJsonBody(req, limits.maxBodyBytes)
  if (read.kind === 'aborted') return { aborted: true }
  if (read.kind === 'too_large') {
    return { body: opts.keepRestForDryRun ? read.rest : undefined, refusal: overCap(limits) }
  }
  if (read.json === undefined) {
    return { body: read.body, refusal: { status: 400, message: 'the body is not valid JSON' } }
  }
  return judge(countSqlRows(read.json), check.name, limit, { body: read.body })
}

function judge(count: Count, name: SizeLimitName, limit: number, out: SizeOutcome): SizeOutcome {
  if (count.kind === 'invalid') return { ...out, refusal: { status: 400, message: count.message } }
  if (count.kind === 'none' || count.count <= limit) return out
  const message = sizeErrorMessage(name, count.count, limit)
  return { ...out, refusal: { status: 400, message, limitName: name, count: count.count } }
}
