import { every, type Timer } from '../clock.js'
import { watch, type FSWatcher } from 'node:fs'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { basename, dirname } from 'node:path'
import { maskUrl } from '../mask-url.js'
import { connectionCaps, openFileLimit } from './connection-caps.js'
import { askServerInfo } from '../history/server-version.js'
import { closeCore, type Core } from './core.js'
import { closeServer } from './admin-server.js'
import { reloadOnHangup, stopOnSignals } from './signals.js'

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

/** Which listener: the setting that names its port, and the flag that beats it. */
export type Listener = 'listen' | 'admin'

/**
 * Why a listener could not start, in the operator's terms (issue #34): the setting to change
 * and the socket's error, not only the address.
 */
export function listenFailure(
  err: unknown,
  listener: Listener,
  host: string,
  port: number
): string {
  const code = (err as NodeJS.ErrnoException).code ?? String((err as Error).message ?? err)
  const setting = `${listener}.port`
  const change =
    listener === 'listen'
      ? `set ${setting} (or --port) to a free port, or stop what holds it`
      : `set ${setting} to a free port (never the proxy's), or stop what holds it`
  if (code === 'EADDRINUSE')
    return `${setting} ${port} on ${host} is in use (EADDRINUSE): ${change}`
  if (code === 'EACCES')
    return `${setting} ${port} on ${host} needs privileges (EACCES): use a port above 1023, or give the process CAP_NET_BIND_SERVICE`
  if (code === 'EADDRNOTAVAIL')
    return `${listener}.host ${host} is not an address of this machine (EADDRNOTAVAIL): set ${listener}.host`
  return `${setting} ${port} on ${host} cannot listen (${code})`
}

/** Listens, or logs why not (naming the setting) and exits 1. */
export async function listenOrExit(
  core: Core,
  server: Server,
  listener: Listener
): Promise<AddressInfo> {
  const { host, port } = core.holder.current.config[listener]
  try {
    return await listenOn(server, port, host)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    core.logger.fatal(
      { setting: `${listener}.port`, host, port, error: code },
      listenFailure(err, listener, host, port)
    )
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
      // SPEC §4: what one process lets in (auto worked out from its open-file limit).
      connections: connectionCaps(config, workers, openFileLimit()),
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

/** A stop, once the file and the summary are let go: `drain` what serves, the store, the admin listener. */
export async function closeServing(
  core: Core,
  adminServer: Server,
  drain: () => Promise<void>
): Promise<void> {
  await drain()
  await closeCore(core)
  await closeServer(adminServer)
}

/**
 * What both ways of serving (one process, a primary and its workers) run once their listeners
 * are up: the file watched, the summary timed, the signals handled (a stop: `drain` what
 * serves, then the store, then the admin listener), and only then the listening line and the
 * first word about the upstream.
 */
export function serveUntilStopped(
  core: Core,
  opts: {
    proxy: AddressInfo
    admin: AddressInfo
    processes: number
    /** A stop's closing, once the file and the summary are let go (closeServing). */
    close: () => Promise<void>
    /** Before each summary line: what the workers counted (a primary). */
    gather?: () => Promise<void>
  }
): void {
  const watcher = watchConfig(core)
  const summaryTimer = startSummary(core, opts.gather)
  stopOnSignals(core, async () => {
    watcher?.close()
    summaryTimer.cancel()
    await opts.close()
  })
  reloadOnHangup(core)
  // Only now: a SIGHUP sent on seeing this line must find its handler (it would kill the
  // process otherwise).
  logListening(core, opts.proxy, opts.admin, opts.processes)
  void probeUpstream(core)
}
