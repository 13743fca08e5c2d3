import pino, { type Logger } from 'pino'

export type { Logger }

/**
 * pino JSON on stdout. The gateway never passes headers or bodies to the logger; the redact
 * list is the second line of defence should a future log call pass a request object.
 */
export function createLogger(opts: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { service: 'basegate' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: {
        paths: [
          '*.headers.authorization',
          '*.headers.cookie',
          '*.headers["set-cookie"]',
          'headers.authorization',
          'headers.cookie',
          'token',
          '*.token',
          'body',
          '*.body',
        ],
        censor: '[redacted]',
      },
    },
    opts.destination ?? pino.destination({ dest: 1, sync: false })
  )
}
