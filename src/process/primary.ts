import type { AddressInfo } from 'node:net'
import type { Cli } from './runtime.js'
import { createLogger } from '../observe/log.js'
import type { Config } from '../types.js'
import { WorkerPool } from './worker-pool.js'
import { sumStates } from '../protect/protector.js'
import { mergeCounts } from '../observe/status-recorder.js'
import { createAdmin } from './admin-server.js'
import { bootCore } from './core.js'
import { closeServing, listenFailure, listenOrExit, serveUntilStopped } from './lifecycle.js'
import { DRAIN_MS } from './proxy-server.js'
import type { Runtime } from './runtime.js'

/**
 * `workers: N` (issue #14), the way nginx runs `worker_processes`: this primary reads the
 * file, serves the admin port, reloads, and merges its workers' metrics and summaries; the
 * workers share the proxy listener.
 */
export async function runPrimary(
  cli: Cli,
  config: Config,
  runtime: Runtime,
  count: number
): Promise<void> {
  const logger = createLogger({ level: runtime.logLevel })
  const workers = new WorkerPool(count, () => core.holder.current.config, logger, runtime.clock)
  const core = await bootCore(cli, config, runtime, logger, (c) => workers.broadcastConfig(c))
  const admin = createAdmin(core, {
    flush: async () => void (await workers.ask('flush')),
    protect: async () => sumStates(await workers.ask('protect')),
    counts: async () => mergeCounts(await workers.ask('status')),
    workers: {
      serving: () => workers.serving,
      renderMetrics: async () => core.metrics.renderWith(await workers.ask('metrics')),
    },
  })
  let p: AddressInfo
  try {
    p = await workers.start()
  } catch (err) {
    const { host, port } = config.listen
    const why = (err as NodeJS.ErrnoException).code
      ? listenFailure(err, 'listen', host, port)
      : String((err as Error).message)
    logger.fatal(
      { error: (err as NodeJS.ErrnoException).code },
      `the workers could not start: ${why}`
    )
    logger.flush()
    await workers.drain(DRAIN_MS).catch(() => {})
    process.exit(1)
  }
  const a = await listenOrExit(core, admin, 'admin')
  serveUntilStopped(core, {
    proxy: p,
    admin: a,
    processes: count,
    close: () => closeServing(core, admin, () => workers.drain(DRAIN_MS + 2_000)),
    gather: async () => {
      for (const c of await workers.ask('summary')) core.summary.absorb(c)
    },
  })
}
