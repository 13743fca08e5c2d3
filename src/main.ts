#!/usr/bin/env node
import cluster from 'node:cluster'
import { systemClock } from './clock.js'
import { parseCli } from './cli.js'
import { formatWarnings, loadConfigOrExit } from './process/load.js'
import { runPrimary } from './process/primary.js'
import type { Runtime } from './process/runtime.js'
import { serveAlone } from './process/serve-alone.js'
import { runWorker } from './process/worker.js'
import { resolveWorkers } from './process/worker-count.js'

// The entry point: parse the command line, read the environment once, and hand the process to
// its role (Envoy's main.go): serving alone, a primary of workers, or one of its workers.

const env = process.env
const ms = (value: string | undefined, fallback: number) => Number(value ?? fallback)

const runtime: Runtime = {
  env,
  clock: systemClock,
  logLevel: env.LOG_LEVEL,
  summaryMs: ms(env.BASEGATE_SUMMARY_MS, 60_000),
  serverInfoMs: ms(env.BASEGATE_SERVER_INFO_MS, 10 * 60_000),
  reportFlushMs: ms(env.BASEGATE_REPORT_FLUSH_MS, 2000),
  // SPEC §5: at least every 5 s; a killed process loses at most this much of its counts.
  usageFlushMs: Math.min(5000, ms(env.BASEGATE_USAGE_FLUSH_MS, 2000)),
}

async function main(): Promise<void> {
  const cli = await parseCli(process.argv.slice(2))
  if (cli === null) return
  // The marker, not cluster.isWorker alone: under an outer cluster (PM2's cluster mode)
  // basegate is an ordinary process.
  if (cluster.isWorker && env.BASEGATE_WORKER === '1') return runWorker(cli, runtime)
  const { config, warnings } = await loadConfigOrExit(cli.file, env, cli.flags, cli.problems)
  // Said before the first log line, as `check` says them.
  if (warnings.length > 0) process.stderr.write(formatWarnings(warnings) + '\n')
  const count = resolveWorkers(config.workers)
  if (count === 1) return serveAlone(cli, config, runtime)
  return runPrimary(cli, config, runtime, count)
}

void main()
