import cluster from 'node:cluster'
import { systemClock } from './clock.js'
import { parseCli } from './cli.js'
import { loadConfigOrExit } from './process/load.js'
import { runtimeOf } from './process/runtime.js'
import { createLogger } from './observe/log.js'
import { formatProblems } from './config/load.js'
import { resolveWorkers } from './process/worker-count.js'

// The server's entry (main.ts loads it): parse the command line, read the environment once,
// and hand the process to its role (Envoy's main.go): serving alone, a primary of workers, or
// one of its workers.

const env = process.env

async function main(): Promise<void> {
  // The environment's numbers are checked like the file's values (issue #41): `check` lists
  // their problems with the file's, and a start exits 2 naming them.
  const { runtime, problems } = runtimeOf(env, systemClock)
  const cli = await parseCli(process.argv.slice(2), problems)
  if (cli === null) return
  if (problems.length > 0) {
    process.stderr.write(formatProblems(problems) + '\n')
    process.exit(2)
  }
  // The marker, not cluster.isWorker alone: under an outer cluster (PM2's cluster mode)
  // basegate is an ordinary process.
  if (cluster.isWorker && env.BASEGATE_WORKER === '1')
    return (await import('./process/worker.js')).runWorker(cli, runtime)
  const { config, warnings } = await loadConfigOrExit(cli.file, env, cli.flags, cli.problems)
  // Issue #41: the start's warnings are JSON lines like every other (jq reads them all).
  const logger = createLogger({ level: runtime.logLevel })
  for (const w of warnings)
    logger.warn({ field: w.field, warning: true }, `${w.field}: ${w.message}`)
  const count = resolveWorkers(config.workers)
  // Loaded once the file is known good: a start refused for its config exits before them.
  if (count === 1)
    return (await import('./process/serve-alone.js')).serveAlone(cli, config, runtime)
  return (await import('./process/primary.js')).runPrimary(cli, config, runtime, count)
}

void main()
