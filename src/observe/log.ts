import pino, { type Logger } from 'pino'

export type { Logger }

/**
 * pino JSON on stdout. No secret can reach a log because no log call is given one: the
 * request line is built field by field (method, path without query, class, key, limits,
 * status, timings), never from headers or bodies. pino's redaction is not used: with
 * wildcard paths it cost ~8 % of the gateway's CPU per request (cpu profile, issue #2).
 * `time` is epoch milliseconds (pino's default; `jq '.time/1000|todate'` reads it).
 */
export function createLogger(
  opts: { level?: string; destination?: pino.DestinationStream } = {}
): Logger {
  return pino(
    {
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { service: 'basegate' },
      formatters: { level: (label) => ({ level: label }) },
    },
    opts.destination ?? pino.destination({ dest: 1, sync: false })
  )
}
