import type { Cli } from './runtime.js'
import { createLogger } from '../observe/log.js'
import type { Config } from '../types.js'
import { closeServer, createAdmin } from './admin-server.js'
import { bootCore, closeCore } from './core.js'
import {
  listenOrExit,
  logListening,
  probeUpstream,
  startSummary,
  watchConfig,
} from './lifecycle.js'
import { createProxy, drainProxy, flushRecorders } from './proxy-server.js'
import type { Runtime } from './runtime.js'
import { reloadOnHangup, stopOnSignals } from './signals.js'

/** `workers: 1`: this process serves the proxy and admin ports. */
export async function serveAlone(cli: Cli, config: Config, runtime: Runtime): Promise<void> {
  const core = await bootCore(cli, config, runtime, createLogger({ level: runtime.logLevel }))
  const proxy = createProxy(core)
  const admin = createAdmin(core, {
    flush: () => flushRecorders(proxy),
    protect: async () => proxy.gateway.protector.state(),
    counts: async () => core.status.counts(core.runtime.clock.now()),
  })
  const p = await listenOrExit(core, proxy.server, 'listen')
  const a = await listenOrExit(core, admin, 'admin')
  const watcher = watchConfig(core)
  const summaryTimer = startSummary(core)
  stopOnSignals(core, async () => {
    watcher?.close()
    summaryTimer.cancel()
    await drainProxy(proxy)
    await closeCore(core)
    await closeServer(admin)
  })
  reloadOnHangup(core)
  // Only now: a SIGHUP sent on seeing this line must find its handler (it would kill the
  // process otherwise).
  logListening(core, p, a, 1)
  void probeUpstream(core)
}
