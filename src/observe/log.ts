import pino, { type Logger } from 'pino'
import { LineBatch } from './line-batch.js'

export type { Logger }

/**
 * pino JSON on stdout. No secret can reach a log because no log call is given one: the
 * request line is built field by field (method, path without query, class, key, limits,
 * status, timings), never from headers or bodies. pino's redaction is not used: with
 * wildcard paths it cost ~8 % of the gateway's CPU per request (cpu profile, issue #2).
 * `time` is epoch milliseconds (pino's default; `jq '.time/1000|todate'` reads it).
 */
export function createLogger(
  opts: { level?: string; destination?: pino.DestinationStream; worker?: number } = {}
): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base:
        opts.worker === undefined
          ? { service: 'basegate' }
          : { service: 'basegate', worker: opts.worker },
      formatters: { level: (label) => ({ level: label }) },
    },
    opts.destination ?? stdoutLines(opts.worker !== undefined)
  )
}

const PIPE_BUF = 4096
/** SonicBoom's own largest write. */
const MAX_WRITE = 16 * 1024

/**
 * stdout, asynchronously, a turn's lines at a time (line-batch.ts). Worker processes share
 * stdout: a write of at most PIPE_BUF bytes (4096 on Linux) to a pipe is atomic, and both the
 * batch and SonicBoom's buffer hold whole lines, so lines of two workers never mix.
 */
function stdoutLines(worker: boolean): LineBatch {
  const maxWrite = worker ? PIPE_BUF : MAX_WRITE
  return new LineBatch(pino.destination({ dest: 1, sync: false, maxWrite }), maxWrite)
}
