import pino from 'pino'
import type { Logger } from './log.js'

/**
 * The fields of a plain request line, in the order pino writes them, each with how it is
 * written (a JSON string, or a number as is): the one list the serializer below, the finish
 * (observe/request-log.ts) and the test read.
 */
export const PLAIN_FIELDS = [
  ['method', 'safe'],
  ['path', 'string'],
  ['class', 'safe'],
  ['key', 'safe'],
  ['limit', 'number'],
  ['remaining', 'number'],
  ['reset', 'number'],
  ['team', 'string'],
  ['used', 'number'],
  ['quota', 'number'],
  ['policy', 'string'],
  ['status', 'number'],
  ['outcome', 'safe'],
  ['store_ms', 'number'],
  ['store_time', 'number'],
  ['duration_ms', 'number'],
  ['delayed_ms', 'number'],
  ['upstream_ms', 'number'],
  ['api_change', 'safe'],
  ['client_ip', 'safe'],
  ['user_agent', 'string'],
  ['request_id', 'safe'],
  ['bytes_in', 'number'],
  ['bytes_out', 'number'],
] as const

/**
 * `string`: any text, JSON-escaped; `safe`: text that can hold nothing JSON escapes (an HTTP
 * method token, a class or outcome name, a key or client IP, a history entry id, a sanitised
 * request id), written as is; `number`.
 */
type FieldKind = { string: string; safe: string; number: number }

/**
 * The fields' part of a line, compiled once from PLAIN_FIELDS into straight-line code (as
 * fast-json-stringify does): a loop over the list with computed property reads cost 4 % of a
 * request's CPU in the rotating bench; this reads each field by its name. The names are the
 * list's own identifiers, never input.
 */
const fields = new Function(
  'l',
  'return ' +
    PLAIN_FIELDS.map(([k, kind]) => {
      const value =
        kind === 'string'
          ? `JSON.stringify(l.${k})`
          : kind === 'safe'
            ? `'"' + l.${k} + '"'`
            : `l.${k}`
      return `(l.${k} === undefined ? '' : ',"${k}":' + ${value})`
    }).join(' + ')
) as (l: Record<string, unknown>) => string

/** A plain request line: every field of PLAIN_FIELDS, absent ones undefined. */
export type PlainLine = {
  [F in (typeof PLAIN_FIELDS)[number] as F[0]]: FieldKind[F[1]] | undefined
}

/**
 * The request line of an ordinary forwarded call, the one written for nearly every request,
 * serialised by hand and written to pino's own destination: the same bytes pino writes for
 * the same object (a test compares them), without building a throw-away object per call and
 * walking it (issue #14: 21–30 µs a call in pino's path). Null when the logger is not one
 * this can write for (then the caller uses pino as usual).
 */
export function createPlainLineWriter(
  logger: Logger
): ((l: PlainLine, level?: 'info' | 'warn', msg?: string) => void) | null {
  const internals = logger as unknown as Record<symbol, unknown>
  const stream = internals[pino.symbols.streamSym] as { write(s: string): unknown } | undefined
  const chindings = internals[pino.symbols.chindingsSym]
  if (!stream || typeof stream.write !== 'function' || typeof chindings !== 'string') return null
  return (l, level = 'info', msg = 'request') => {
    if (!logger.isLevelEnabled(level)) return
    stream.write(
      `{"level":"${level}","time":${Date.now()}${chindings}` +
        fields(l) +
        `,"msg":${JSON.stringify(msg)}}\n`
    )
  }
}
