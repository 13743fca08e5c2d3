import { every, type Timer } from '../clock.js'
import { watch, type FSWatcher } from 'node:fs'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { basename, dirname } from 'node:path'
import { maskUrl } from '../config/view.js'
import { askServerInfo } from '../history/server-version.js'
import type { Core } from './core.js'

// A serving process's life around its listeners: listening, the first word about the
// upstream, watching the file, the summary line.

const WATCH_DEBOUNCE_MS = 250

function listenOn(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}

/** Listens, or logs why not and exits 1. */
export async function listenOrExit(
  core: Core,
  server: Server,
  port: number,
  host: string
): Promise<AddressInfo> {
  try {
    return await listenOn(server, port, host)
  } catch (err) {
    core.logger.fatal({ err }, 'cannot listen')
    core.logger.flush()
    process.exit(1)
  }
}

export function logListening(
  core: Core,
  proxy: AddressInfo,
  admin: AddressInfo,
  workers: number
): void {
  const config = core.holder.current.config
  core.logger.info(
    {
      proxy: { host: proxy.address, port: proxy.port },
      admin: { host: admin.address, port: admin.port },
      upstream: maskUrl(config.upstream.url),
      store: core.stores.kind,
      deployment: config.deployment,
      mode: config.mode,
      workers,
    },
    'listening'
  )
}

/** The first screen must not hide a missing server: say so once at start (issue #12). */
export async function probeUpstream(core: Core): Promise<void> {
  const url = core.holder.current.config.upstream.url
  const r = await askServerInfo(url, 3000)
  if ('error' in r) {
    core.logger.warn(
      { upstream: maskUrl(url), error: r.error },
      'the upstream does not answer: calls will get 502 until it does (set upstream.url, BASEGATE_UPSTREAM or --upstream; `npx basegate demo-upstream` serves a stand-in)'
    )
  }
}

/**
 * Reload on change: watch the folder, not the file, since editors and Kubernetes ConfigMaps
 * replace the file (a rename, or the `..data` symlink swap) rather than write into it.
 */
export function watchConfig(core: Core): FSWatcher | null {
  let debounce: Timer | null = null
  const name = basename(core.file)
  try {
    const watcher = watch(dirname(core.file), (_event, changed) => {
      if (changed !== null && changed !== name && !String(changed).startsWith('..')) return
      debounce?.cancel()
      debounce = core.runtime.clock.setTimer(
        () => void core.reload('file change'),
        WATCH_DEBOUNCE_MS
      )
    })
    watcher.on('error', () => {})
    return watcher
  } catch (err) {
    core.logger.warn(
      { err },
      'cannot watch the configuration file; reload with SIGHUP or POST /v1/reload'
    )
    return null
  }
}

/** SPEC §7: every 60 s, the busiest keys and the teams past 80 % (warn at 100 %). */
export function startSummary(core: Core, gather: () => Promise<void> = async () => {}): Timer {
  return every(
    core.runtime.clock,
    core.runtime.summaryMs,
    () =>
      void gather().then(() => {
        const line = core.summary.flush()
        if (line.teams_over_100.length > 0)
          core.logger.warn(line, 'usage summary: a team has used up its monthly quota')
        else core.logger.info(line, 'usage summary')
      })
  )
}
