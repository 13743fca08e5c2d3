import type { Cli } from './runtime.js'
import { createLogger } from '../observe/log.js'
import type { Config } from '../types.js'
import { createAdmin } from './admin-server.js'
import { bootCore } from './core.js'
import { listenOrExit, serveUntilStopped } from './lifecycle.js'
import { createProxy, drainProxy, flushRecorders } from './proxy-server.js'
import type { Runtime } from './runtime.js'

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
  serveUntilStopped(core, {
    proxy: p,
    admin: a,
    adminServer: admin,
    processes: 1,
    drain: () => drainProxy(proxy),
  })
}
