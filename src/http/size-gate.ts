import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import type { SizeLimits } from '../types.js'
import { readBodyUpTo, replayThenRest } from './read-body.js'
import {
  countBodyArray,
  countListRows,
  countSqlRows,
  limitFor,
  sizeErrorMessage,
  type Count,
  type SizeCheck,
  type SizeLimitName,
} from './size-limits.js'

export interface SizeOutcome {
  /** The body to forward when it had to be read (byte for byte as received). */
  body?: Buffer | Readable
  /** Set when the call breaks a size rule (refused in enforce mode, logged in dry-run). */
  refusal?: { status: 400 | 413; message: string; limitName?: SizeLimitName; count?: number }
  /** For the debug log: SQL the parser could not read. */
  note?: string
  /** The client went away while its body was read. */
  aborted?: boolean
}

/** SPEC §4 size checks on one request: count, compare, and keep the body for forwarding. */
export async function checkSize(
  check: SizeCheck,
  req: IncomingMessage,
  query: string,
  limits: SizeLimits,
  opts: { keepRestForDryRun: boolean }
): Promise<SizeOutcome> {
  const limit = limitFor(check.name, limits)
  if (!check.needsBody) return judge(countListRows(query), check.name, limit, {})

  const read = await readBodyUpTo(req, limits.maxBodyBytes)
  if (read.kind === 'aborted') return { aborted: true }
  if (read.kind === 'too_large') {
    return {
      body: opts.keepRestForDryRun
        ? Readable.from(replayThenRest(read.chunks, req), { objectMode: false })
        : undefined,
      refusal: {
        status: 413,
        message: `the body is over max_body_bytes (${limits.maxBodyBytes} bytes)`,
      },
    }
  }
  let json: unknown
  try {
    json = JSON.parse(read.body.toString('utf8'))
  } catch {
    return { body: read.body, refusal: { status: 400, message: 'the body is not valid JSON' } }
  }
  const count = check.field !== null ? countBodyArray(json, check.field) : countSqlRows(json)
  return judge(count, check.name, limit, { body: read.body })
}

function judge(count: Count, name: SizeLimitName, limit: number, out: SizeOutcome): SizeOutcome {
  if (count.kind === 'invalid') return { ...out, refusal: { status: 400, message: count.message } }
  if (count.kind === 'none') return count.note ? { ...out, note: count.note } : out
  if (count.count <= limit) return out
  return {
    ...out,
    refusal: {
      status: 400,
      message: sizeErrorMessage(name, count.count, limit),
      limitName: name,
      count: count.count,
    },
  }
}
