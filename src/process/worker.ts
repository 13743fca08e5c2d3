import cluster from 'node:cluster'
import type { Cli } from './runtime.js'
import { createLogger } from '../observe/log.js'
import type { Config } from '../types.js'
import { receiveConfig, serveWorker } from './worker-link.js'
import { bootCore, closeCore, type Core } from './core.js'
import { createProxy, drainProxy, flushRecorders, type Proxy } from './proxy-server.js'
import type { Runtime } from './runtime.js'
import { ignoreHangup, stopOnSignals } from './signals.js'

const WORKER_CONFIG_WAIT_MS = 10_000

/** One of the primary's proxy processes. */
export async function runWorker(cli: Cli, runtime: Runtime): Promise<void> {
  const logger = createLogger({ level: runtime.logLevel, worker: cluster.worker?.id ?? 0 })
  let config: Config
  try {
    config = await receiveConfig(WORKER_CONFIG_WAIT_MS, runtime.clock)
  } catch (err) {
    logger.fatal({ err }, 'worker could not start')
    logger.flush()
    process.exit(1)
  }
  // Listen to the primary from here on: a reload or SIGTERM while this worker boots still lands.
  let running: { core: Core; proxy: Proxy; stop: (source: string) => void } | null = null
  let latest = config
  serveWorker({
    adopt: (c) => {
      latest = c
      running?.core.holder.adopt(c)
      // The primary reloaded (SIGHUP reaches it, not the workers): re-read the TLS files too.
      running?.proxy.reloadTls()
    },
    drain: (source) => (running ? running.stop(source) : process.exit(0)),
    answer: async (what) => {
      if (running === null) return null
      if (what === 'metrics') return running.core.metrics.snapshot()
      if (what === 'summary') return running.core.summary.take()
      if (what === 'protect') return running.proxy.gateway.protector.state()
      if (what === 'status')
        return running.core.status.counts(running.core.runtime.clock.now(), 200)
      await flushRecorders(running.proxy)
      return true
    },
    // The primary sends connections only once this worker said it serves (below).
    connection: (socket) => running?.proxy.server.emit('connection', socket),
  })
  const core = await bootCore(cli, config, runtime, logger)
  if (latest !== config) core.holder.adopt(latest)
  const proxy = createProxy(core)
  ignoreHangup()
  const stop = stopOnSignals(core, async () => {
    await drainProxy(proxy)
    await closeCore(core)
  })
  running = { core, proxy, stop }
  // The primary owns the listener and hands this process its connections (worker-pool.ts).
  process.send?.({ bg: 'serving' })
}
