#!/usr/bin/env node
import { createAdaptorServer } from '@hono/node-server'
import { watch, type FSWatcher } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { request } from 'undici'
import type { AddressInfo } from 'node:net'
import { basename, dirname } from 'node:path'
import cluster from 'node:cluster'
import { createAdminApp, type AdminDeps } from './admin/routes.js'
import { createGateway, type Gateway } from './app.js'
import { parseCli, version, type Cli } from './cli.js'
import { ConfigHolder } from './config/holder.js'
import { formatProblems, loadConfigFile } from './config/load.js'
import { maskUrl } from './admin/mask.js'
import { createStore, type Stores } from './deps.js'
import { createForwarder, type Forwarder } from './http/proxy.js'
import { createLogger, type Logger } from './observe/log.js'
import { Metrics } from './observe/metrics.js'
import { UsageSummary, type SummaryCounts } from './observe/summary.js'
import { resolveWorkers } from './workers/count.js'
import { WorkerPool } from './workers/primary.js'
import { receiveConfig, serveWorker } from './workers/worker.js'
import { UpgradeRecorder } from './history/report-store.js'
import { ServerVersion } from './history/server-version.js'
import type { Config } from './types.js'

const DRAIN_MS = 10_000
const SUMMARY_MS = 60_000
const WATCH_DEBOUNCE_MS = 250
const STORE_WAIT_MS = 5_000
const WORKER_CONFIG_WAIT_MS = 10_000

type MetricsSnapshot = Awaited<ReturnType<Metrics['snapshot']>>

/** What every basegate process holds (one serving alone, a primary, a worker). */
interface Core {
  file: string
  logger: Logger
  metrics: Metrics
  summary: UsageSummary
  holder: ConfigHolder
  stores: Stores
  serverVersion: ServerVersion
  draining: boolean
  reload(source: string): ReturnType<ConfigHolder['reload']>
}

/** A process that serves the proxy port (alone, or as a worker). */
interface Proxy {
  /** SPEC §8: the calls this process saw that an upgrade would break, batched to the store. */
  recorder: UpgradeRecorder
  forwarder: Forwarder
  gateway: Gateway
  server: Server
}

function listenOn(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}

/** Team changes made through any instance's admin API (kept in the store). */
async function refreshTeams(i: Pick<Core, 'holder' | 'stores' | 'logger'>): Promise<void> {
  try {
    i.holder.setTeamOverrides(await i.stores.overrides.load())
  } catch (err) {
    i.logger.warn({ err }, 'team changes could not be read from the store; the file values apply')
  }
}

/**
 * Issue #11: a fresh instance takes no traffic before its store answers (or STORE_WAIT_MS
 * passed: then it starts limiting alone under `on_error: open`, or answering 503 under
 * `closed`, and says so).
 */
async function waitForStore(stores: Stores, logger: Logger): Promise<void> {
  if (stores.kind === 'memory') return
  const deadline = Date.now() + STORE_WAIT_MS
  while (Date.now() < deadline) {
    if (await stores.store.ready()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  logger.warn({ waited_ms: STORE_WAIT_MS }, 'the store does not answer yet; serving without it')
}

/** Slowloris: a request head (and a whole request) must arrive in time. */
function createProxyServer(config: Config, gateway: Gateway): Server {
  const { headersTimeoutMs, requestTimeoutMs } = config.listen
  // Node checks these timers only every connectionsCheckingInterval (30 s by default): check
  // often enough that the limits mean what they say.
  const tightest = Math.min(headersTimeoutMs, requestTimeoutMs || Infinity)
  const proxy = createServer(
    {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(tightest / 4))),
    },
    gateway.handleRequest
  )
  proxy.on('upgrade', gateway.handleUpgrade)
  proxy.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // Malformed requests (smuggling attempts, oversized headers) and too-slow clients never
    // reach the gateway. Answer as Node would, then close for good: a half-close would let a
    // slowloris client keep the socket by writing on.
    const status =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? '408 Request Timeout'
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? '431 Request Header Fields Too Large'
          : '400 Bad Request'
    if (!socket.writable) return socket.destroy()
    socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`, () =>
      socket.destroy()
    )
  })
  return proxy
}

/** The configuration to start with, or exit 2 with every problem (SPEC §1). */
async function loadOrExit(cli: Cli): Promise<Config> {
  const loaded = await loadConfigFile(cli.file, process.env, cli.flags)
  const problems = [...cli.problems, ...(loaded.ok ? [] : loaded.problems)]
  if (!loaded.ok || problems.length > 0) {
    process.stderr.write(formatProblems(problems) + '\n')
    process.exit(2)
  }
  return loaded.config
}

/** The parts every role has: config, store, metrics, the server's version, the report. */
async function bootCore(
  cli: Cli,
  config: Config,
  logger: Logger,
  onApplied: (config: Config) => void = () => {}
): Promise<Core> {
  const metrics = new Metrics({ version: version() })
  const holder = new ConfigHolder(cli.file, config, cli.flags)
  const stores = createStore(config, logger, metrics)
  const serverVersion = new ServerVersion({
    configured: () => holder.current.config.server.version,
    upstreamUrl: config.upstream.url,
    logger,
    onChange: (v) => metrics.setServerVersion(v),
  })
  const core: Core = {
    file: cli.file,
    logger,
    metrics,
    summary: new UsageSummary(),
    holder,
    stores,
    serverVersion,
    draining: false,
    reload: async (source) => {
      const r = await holder.reload()
      metrics.countReload(r.ok)
      if (!r.ok) {
        const problems = r.problems.map((p) => `${p.field}: ${p.message}`)
        logger.error(
          { file: cli.file, source, problems },
          'configuration refused; the running one stays'
        )
        return r
      }
      onApplied(holder.current.config)
      logger.info({ file: cli.file, source, changed: r.changed }, 'configuration reloaded')
      if (r.needsRestart.length > 0) {
        logger.warn(
          { fields: r.needsRestart },
          'these changes take effect after a restart; the running values stay'
        )
      }
      return r
    },
  }
  await waitForStore(stores, logger)
  await refreshTeams(core)
  stores.overrides.onChange(() => void refreshTeams(core))
  serverVersion.start()
  return core
}

function createProxy(core: Core): Proxy {
  const config = core.holder.current.config
  const recorder = new UpgradeRecorder(core.stores.report, (err) =>
    core.logger.warn({ err }, 'upgrade report counts could not be written; kept for the next try')
  )
  recorder.start()
  const forwarder = createForwarder({ url: config.upstream.url })
  const gateway = createGateway({
    serverVersion: () => core.serverVersion.current(),
    recorder,
    snapshot: () => core.holder.current,
    store: core.stores.store,
    forwarder,
    logger: core.logger,
    upstreamUrl: config.upstream.url,
    metrics: core.metrics,
    summary: core.summary,
    // SPEC §4: workers share size_limits.buffer_bytes; each holds its share.
    processes: resolveWorkers(config.workers),
  })
  return { recorder, forwarder, gateway, server: createProxyServer(config, gateway) }
}

function createAdmin(
  core: Core,
  opts: { flush: () => Promise<void>; workers?: AdminDeps['workers'] }
): Server {
  const { holder, stores, metrics, serverVersion } = core
  return createAdaptorServer({
    fetch: createAdminApp({
      holder,
      store: stores.store,
      overrides: stores.overrides,
      metrics,
      storeKind: stores.kind,
      draining: () => core.draining,
      reload: () => core.reload('admin'),
      history: { serverVersion: () => serverVersion.current(), report: stores.report, ...opts },
      workers: opts.workers,
    }).fetch,
  }) as Server
}

/** The first screen must not hide a missing server: say so once at start (issue #12). */
async function probeUpstream(core: Core): Promise<void> {
  const url = core.holder.current.config.upstream.url
  try {
    const r = await request(`${url.replace(/\/+$/, '')}/server-info/`, {
      headersTimeout: 3000,
      bodyTimeout: 3000,
    })
    await r.body.dump()
  } catch (err) {
    const code = (err as { code?: string }).code ?? (err as Error).name
    core.logger.warn(
      { upstream: maskUrl(url), error: code },
      'the upstream does not answer: calls will get 502 until it does (set upstream.url, BASEGATE_UPSTREAM or --upstream; `npx basegate demo-upstream` serves a stand-in)'
    )
  }
}

/** Listens, or logs why not and exits 1. */
async function listenOrExit(core: Core, server: Server, port: number, host: string) {
  try {
    return await listenOn(server, port, host)
  } catch (err) {
    core.logger.fatal({ err }, 'cannot listen')
    core.logger.flush()
    process.exit(1)
  }
}

function logListening(core: Core, proxy: AddressInfo, admin: AddressInfo, workers: number): void {
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

/**
 * Reload on change: watch the folder, not the file, since editors and Kubernetes ConfigMaps
 * replace the file (a rename, or the `..data` symlink swap) rather than write into it.
 */
function watchConfig(core: Core): FSWatcher | null {
  let debounce: NodeJS.Timeout | null = null
  const name = basename(core.file)
  try {
    const watcher = watch(dirname(core.file), (_event, changed) => {
      if (changed !== null && changed !== name && !String(changed).startsWith('..')) return
      if (debounce) clearTimeout(debounce)
      debounce = setTimeout(() => void core.reload('file change'), WATCH_DEBOUNCE_MS)
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
function startSummary(core: Core, gather: () => Promise<void> = async () => {}): NodeJS.Timeout {
  const timer = setInterval(
    () =>
      void gather().then(() => {
        const line = core.summary.flush()
        if (line.teams_over_100.length > 0)
          core.logger.warn(line, 'usage summary: a team has used up its monthly quota')
        else core.logger.info(line, 'usage summary')
      }),
    Number(process.env.BASEGATE_SUMMARY_MS ?? SUMMARY_MS)
  )
  timer.unref()
  return timer
}

/** SPEC §1/§6: stop accepting, let in-flight requests and tunnels finish (≤ 10 s). */
async function drainProxy(p: Proxy): Promise<void> {
  const deadline = Date.now() + DRAIN_MS
  const closed = new Promise<void>((resolve) => p.server.close(() => resolve()))
  // Keep-alive connections that finish their request are closed as they go idle.
  const sweep = setInterval(() => p.server.closeIdleConnections(), 50)
  p.server.closeIdleConnections()
  const tunnelsDone = (async () => {
    while (p.gateway.tunnels.size > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50))
  })()
  await Promise.race([
    Promise.all([closed, tunnelsDone]),
    new Promise((r) => setTimeout(r, DRAIN_MS)),
  ])
  clearInterval(sweep)
  p.server.closeAllConnections()
  for (const t of p.gateway.tunnels) t.destroy()
  await p.forwarder.close().catch(() => {})
  await p.recorder.stop().catch(() => {})
}

/** The store connections and timers, after the traffic has stopped. */
async function closeCore(core: Core): Promise<void> {
  core.serverVersion.stop()
  await core.stores.overrides.close().catch(() => {})
  await core.stores.store.close().catch(() => {})
}

/** The admin listener goes last, so /readyz says "draining" while the rest stops. */
function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections?.()
  })
}

/** SIGTERM/SIGINT run `stop` once (SPEC §6); SIGHUP reloads where `reload` is given. */
function onSignals(core: Core, stop: () => Promise<void>, reload: boolean): (s: string) => void {
  const run = (signal: string): void => {
    if (core.draining) return
    core.draining = true
    core.logger.info({ signal }, 'stopping: draining in-flight requests')
    void stop().then(() => {
      core.logger.info('stopped')
      core.logger.flush()
      setTimeout(() => process.exit(0), 20).unref()
    })
  }
  // A worker ignores SIGHUP (a closing terminal sends it to the whole group): its primary
  // reloads and hands it the result.
  process.on('SIGHUP', reload ? () => void core.reload('SIGHUP') : () => {})
  process.on('SIGTERM', () => run('SIGTERM'))
  process.on('SIGINT', () => run('SIGINT'))
  process.on('uncaughtException', (err) => {
    // A socket error escaping its handler must not take every other request down with it.
    core.logger.error({ err }, 'uncaught exception')
  })
  return run
}

/** `workers: 1`: this process serves the proxy and admin ports. */
async function runSingle(cli: Cli, config: Config): Promise<void> {
  const core = await bootCore(cli, config, createLogger())
  const proxy = createProxy(core)
  const admin = createAdmin(core, { flush: () => proxy.recorder.flush() })
  const p = await listenOrExit(core, proxy.server, config.listen.port, config.listen.host)
  const a = await listenOrExit(core, admin, config.admin.port, config.admin.host)
  const watcher = watchConfig(core)
  const summaryTimer = startSummary(core)
  onSignals(
    core,
    async () => {
      watcher?.close()
      clearInterval(summaryTimer)
      await drainProxy(proxy)
      await closeCore(core)
      await closeServer(admin)
    },
    true
  )
  // Only now: a SIGHUP sent on seeing this line must find its handler (it would kill the
  // process otherwise).
  logListening(core, p, a, 1)
  void probeUpstream(core)
}

/**
 * `workers: N` (issue #14), the way nginx runs `worker_processes`: this primary reads the
 * file, serves the admin port, reloads, and merges its workers' metrics and summaries; the
 * workers share the proxy listener.
 */
async function runPrimary(cli: Cli, config: Config, count: number): Promise<void> {
  const logger = createLogger()
  const workers = new WorkerPool(count, () => core.holder.current.config, logger)
  const core = await bootCore(cli, config, logger, (c) => workers.broadcastConfig(c))
  const admin = createAdmin(core, {
    flush: async () => void (await workers.ask('flush')),
    workers: {
      serving: () => workers.serving,
      renderMetrics: async () =>
        core.metrics.renderWith((await workers.ask('metrics')) as MetricsSnapshot[]),
    },
  })
  let p: AddressInfo
  try {
    p = await workers.start()
  } catch (err) {
    logger.fatal({ err }, 'the workers could not start')
    logger.flush()
    await workers.drain(DRAIN_MS).catch(() => {})
    process.exit(1)
  }
  const a = await listenOrExit(core, admin, config.admin.port, config.admin.host)
  const watcher = watchConfig(core)
  const summaryTimer = startSummary(core, async () => {
    for (const c of await workers.ask('summary')) core.summary.absorb(c as SummaryCounts)
  })
  onSignals(
    core,
    async () => {
      watcher?.close()
      clearInterval(summaryTimer)
      await workers.drain(DRAIN_MS + 2_000)
      await closeCore(core)
      await closeServer(admin)
    },
    true
  )
  logListening(core, p, a, count)
  void probeUpstream(core)
}

/** One of the primary's proxy processes. */
async function runWorker(cli: Cli): Promise<void> {
  const logger = createLogger({ worker: cluster.worker?.id ?? 0 })
  let config: Config
  try {
    config = await receiveConfig(WORKER_CONFIG_WAIT_MS)
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
    },
    drain: (source) => (running ? running.stop(source) : process.exit(0)),
    answer: async (what) => {
      if (running === null) return null
      if (what === 'metrics') return running.core.metrics.snapshot()
      if (what === 'summary') return running.core.summary.take()
      await running.proxy.recorder.flush()
      return true
    },
  })
  const core = await bootCore(cli, config, logger)
  if (latest !== config) core.holder.adopt(latest)
  const proxy = createProxy(core)
  const stop = onSignals(
    core,
    async () => {
      await drainProxy(proxy)
      await closeCore(core)
    },
    false
  )
  running = { core, proxy, stop }
  await listenOrExit(core, proxy.server, config.listen.port, config.listen.host)
}

async function main(): Promise<void> {
  const cli = await parseCli(process.argv.slice(2))
  if (cli === null) return
  // The marker, not cluster.isWorker alone: under an outer cluster (PM2's cluster mode)
  // basegate is an ordinary process.
  if (cluster.isWorker && process.env.BASEGATE_WORKER === '1') return runWorker(cli)
  const config = await loadOrExit(cli)
  const count = resolveWorkers(config.workers)
  if (count === 1) return runSingle(cli, config)
  return runPrimary(cli, config, count)
}

void main()
