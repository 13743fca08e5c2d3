import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Cli } from './runtime.js'
import { createLogger } from '../observe/log.js'
import type { Config } from '../types.js'
import { createAdmin } from './admin-server.js'
import { bootCore, type Core } from './core.js'
import { closeServing, listenOrExit, serveUntilStopped } from './lifecycle.js'
import { createProxy, drainProxy, flushRecorders, type Proxy } from './proxy-server.js'
import type { Runtime } from './runtime.js'

/** One process's proxy and admin listeners, up. */
export interface Listening {
  proxy: Proxy
  admin: Server
  proxyAddress: AddressInfo
  adminAddress: AddressInfo
  /** Drains the proxy, then closes the store and the admin listener (what a stop does). */
  close(): Promise<void>
}

/**
 * The proxy and the admin listener of a process serving alone, on a booted core. The tests run
 * it in their own process (test/helpers/live.ts): the serving code without the signals.
 */
export async function listenAlone(core: Core): Promise<Listening> {
  const proxy = createProxy(core)
  const admin = createAdmin(core, {
    flush: () => flushRecorders(proxy),
    protect: async () => proxy.gateway.protector.state(),
    counts: async () => core.status.counts(core.runtime.clock.now()),
  })
  const proxyAddress = await listenOrExit(core, proxy.server, 'listen')
  const adminAddress = await listenOrExit(core, admin, 'admin')
  return {
    proxy,
    admin,
    proxyAddress,
    adminAddress,
    close: () => closeServing(core, admin, () => drainProxy(proxy)),
  }
}

/** `workers: 1`: this process serves the proxy and admin ports. */
export async function serveAlone(cli: Cli, config: Config, runtime: Runtime): Promise<void> {
  const core = await bootCore(cli, config, runtime, createLogger({ level: runtime.logLevel }))
  const l = await listenAlone(core)
  serveUntilStopped(core, {
    proxy: l.proxyAddress,
    admin: l.adminAddress,
    processes: 1,
    close: l.close,
  })
}
