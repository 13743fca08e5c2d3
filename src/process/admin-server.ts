import { createAdaptorServer } from '@hono/node-server'
import type { Server } from 'node:http'
import { createAdminApp, type AdminDeps } from '../admin/routes.js'
import type { Core } from './core.js'
import { version } from '../version.js'
import type { StatusCounts } from '../observe/status-recorder.js'

// The admin listener (hono on @hono/node-server): the admin API and the probes.

export function createAdmin(
  core: Core,
  opts: {
    /** This instance's batched counts written now (the upgrade report's and the days'). */
    flush: () => Promise<void>
    workers?: AdminDeps['workers']
    protect: AdminDeps['protect']
    /** This process's status counts, or its workers' merged. */
    counts: () => Promise<StatusCounts>
  }
): Server {
  const { holder, stores, metrics, serverVersion } = core
  return createAdaptorServer({
    fetch: createAdminApp({
      holder,
      store: stores.windows,
      ledger: stores.ledger,
      changes: stores.changes,
      metrics,
      storeKind: stores.kind,
      storeState: core.storeState,
      draining: () => core.draining,
      reload: () => core.reload('admin'),
      history: {
        serverVersion: () => serverVersion.current(),
        report: stores.report,
        flush: opts.flush,
      },
      workers: opts.workers,
      protect: opts.protect,
      status: { counts: opts.counts, version: version(), startedMs: core.startedMs },
      clock: core.runtime.clock,
      usage: stores.usage,
      shapes: stores.shapes,
      flushUsage: opts.flush,
      logger: core.logger,
    }).fetch,
  }) as Server
}

/** The admin listener goes last, so /readyz says "draining" while the rest stops. */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections?.()
  })
}
