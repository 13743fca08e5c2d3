import type { Clock } from '../clock.js'
import type { Flags } from '../config/flags.js'
import type { ConfigProblem } from '../types.js'

/**
 * What main.ts reads from the process and hands down: nothing below main.ts and cli.ts reads
 * the environment, so every module takes its settings as arguments and a test gives its own.
 */
export interface Runtime {
  /** The environment `${VAR}` is expanded from in limits.yaml, at start and on every reload. */
  env: NodeJS.ProcessEnv
  clock: Clock
  /** pino's level (LOG_LEVEL). */
  logLevel: string | undefined
  /** How often the usage summary is written (SPEC §7: 60 s; BASEGATE_SUMMARY_MS shortens it in tests). */
  summaryMs: number
  /** How often `server.version: auto` asks the upstream (BASEGATE_SERVER_INFO_MS). */
  serverInfoMs: number
  /** How often the upgrade report's counts are written (BASEGATE_REPORT_FLUSH_MS). */
  reportFlushMs: number
  /** How often the calls per day are written (SPEC §5: at most 5 s; BASEGATE_USAGE_FLUSH_MS). */
  usageFlushMs: number
}

/** What the command line asks the server to run with. */
export interface Cli {
  file: string
  flags: Flags
  /** Flag problems, reported with the file's. */
  problems: ConfigProblem[]
}
