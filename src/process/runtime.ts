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

/** The environment's numbers (issue #41: checked as config values are, each named). */
const NUMBERS: readonly {
  name: string
  field: keyof Pick<Runtime, 'summaryMs' | 'serverInfoMs' | 'reportFlushMs' | 'usageFlushMs'>
  fallback: number
  min: number
  max: number
  why?: string
}[] = [
  { name: 'BASEGATE_SUMMARY_MS', field: 'summaryMs', fallback: 60_000, min: 100, max: 3_600_000 },
  {
    name: 'BASEGATE_SERVER_INFO_MS',
    field: 'serverInfoMs',
    fallback: 600_000,
    min: 100,
    max: 86_400_000,
  },
  {
    name: 'BASEGATE_REPORT_FLUSH_MS',
    field: 'reportFlushMs',
    fallback: 2000,
    min: 100,
    max: 5000,
    why: 'SPEC §8: the report lags the calls by at most 5 s',
  },
  {
    name: 'BASEGATE_USAGE_FLUSH_MS',
    field: 'usageFlushMs',
    fallback: 2000,
    min: 100,
    max: 5000,
    why: 'SPEC §5: counts are written at least every 5 s',
  },
]

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

/**
 * What main.ts reads from the environment, checked: a number that is not a whole number of
 * milliseconds in its range (`60s`, `2e3`, `-1`) is a problem naming the variable, never a 1 ms
 * timer (issue #41: BASEGATE_SUMMARY_MS=60s wrote 3,419 summaries in 5 s).
 */
export function runtimeOf(
  env: NodeJS.ProcessEnv,
  clock: Clock
): { runtime: Runtime; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = []
  const values: Record<string, number> = {}
  for (const n of NUMBERS) {
    const text = env[n.name]
    values[n.field] = n.fallback
    if (text === undefined || text === '') continue
    const v = /^[0-9]+$/.test(text.trim()) ? Number(text.trim()) : NaN
    if (Number.isNaN(v))
      problems.push({
        field: n.name,
        message: `${JSON.stringify(text)} is not a whole number of milliseconds (write ${n.fallback} for ${n.fallback / 1000} s)`,
      })
    else if (v < n.min || v > n.max)
      problems.push({
        field: n.name,
        message: `${v} is not from ${n.min} to ${n.max} ms${n.why ? ` (${n.why})` : ''}`,
      })
    else values[n.field] = v
  }
  const level = env.LOG_LEVEL
  if (level !== undefined && level !== '' && !LOG_LEVELS.includes(level))
    problems.push({
      field: 'LOG_LEVEL',
      message: `${JSON.stringify(level)} is not a level (${LOG_LEVELS.join(', ')})`,
    })
  const runtime: Runtime = {
    env,
    clock,
    logLevel: level === '' ? undefined : level,
    summaryMs: values.summaryMs!,
    serverInfoMs: values.serverInfoMs!,
    reportFlushMs: values.reportFlushMs!,
    usageFlushMs: values.usageFlushMs!,
  }
  return { runtime, problems }
}
