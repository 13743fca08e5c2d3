#!/usr/bin/env node
import { createAdaptorServer } from '@hono/node-server'
import { watch, type FSWatcher } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { request } from 'undici'
import type { AddressInfo } from 'node:net'
import { basename, dirname } from 'node:path'
import { createAdminApp } from './admin/routes.js'
import { createGateway, type Gateway } from './app.js'
import { parseCli, version, type Cli } from './cli.js'
import { ConfigHolder } from './config/holder.js'
import { formatProblems, loadConfigFile } from './config/load.js'
import { maskUrl } from './admin/mask.js'
import { createStore, type Stores } from './deps.js'
import { createForwarder, type Forwarder } from './http/proxy.js'
import { createLogger, type Logger } from './observe/log.js'
import { Metrics } from './observe/metrics.js'
import { UsageSummary } from './observe/summary.js'
import { UpgradeRecorder } from './history/report-store.js'
import { ServerVersion } from './history/server-version.js'
import type { Config } from './types.js'

const DRAIN_MS = 10_000
const SUMMARY_MS = 60_000
const WATCH_DEBOUNCE_MS = 250
const STORE_WAIT_MS = 5_000

/** Everything a running instance is made of. */
interface Instance {
  file: string
  logger: Logger
  metrics: Metrics
  summary: UsageSummary
  holder: ConfigHolder
  stores: Stores
  forwarder: Forwarder
  gateway: Gateway
  serverVersion: ServerVersion
  recorder: UpgradeRecorder
  proxy: Server
  admin: Server
  draining: boolean
  reload(source: string): ReturnType<ConfigHolder['reload']>
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
async function refreshTeams(i: Pick<Instance, 'holder' | 'stores' | 'logger'>): Promise<void> {
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

async function boot(cli: Cli): Promise<Instance> {
  const loaded = await loadConfigFile(cli.file, process.env, cli.flags)
  const problems = [...cli.problems, ...(loaded.ok ? [] : loaded.problems)]
  if (!loaded.ok || problems.length > 0) {
    process.stderr.write(formatProblems(problems) + '\n')
    process.exit(2)
  }
  const logger = createLogger()
  const metrics = new Metrics({ version: version() })
  const summary = new UsageSummary()
  const holder = new ConfigHolder(cli.file, loaded.config, cli.flags)
  const config = holder.current.config
  const stores = createStore(config, logger, metrics)
  const forwarder = createForwarder({ url: config.upstream.url })
  const serverVersion = new ServerVersion({
    configured: () => holder.current.config.server.version,
    upstreamUrl: config.upstream.url,
    logger,
    onChange: (v) => metrics.setServerVersion(v),
  })
  const recorder = new UpgradeRecorder(stores.report, (err) =>
    logger.warn({ err }, 'upgrade report counts could not be written; kept for the next try')
  )
  const gateway = createGateway({
    serverVersion: () => serverVersion.current(),
    recorder,
    snapshot: () => holder.current,
    store: stores.store,
    forwarder,
    logger,
    upstreamUrl: config.upstream.url,
    metrics,
    summary,
  })
  const instance: Instance = {
    file: cli.file,
    logger,
    metrics,
    summary,
    holder,
    stores,
    forwarder,
    gateway,
    serverVersion,
    recorder,
    proxy: createProxyServer(config, gateway),
    admin: null as unknown as Server,
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
      } else {
        logger.info({ file: cli.file, source, changed: r.changed }, 'configuration reloaded')
        if (r.needsRestart.length > 0) {
          logger.warn(
            { fields: r.needsRestart },
            'these changes take effect after a restart; the running values stay'
          )
        }
      }
      return r
    },
  }
  instance.admin = createAdaptorServer({
    fetch: createAdminApp({
      holder,
      store: stores.store,
      overrides: stores.overrides,
      metrics,
      storeKind: stores.kind,
      draining: () => instance.draining,
      reload: () => instance.reload('admin'),
      history: {
        serverVersion: () => serverVersion.current(),
        report: stores.report,
        flush: () => recorder.flush(),
      },
    }).fetch,
  }) as Server
  await waitForStore(stores, logger)
  await refreshTeams(instance)
  stores.overrides.onChange(() => void refreshTeams(instance))
  serverVersion.start()
  recorder.start()
  return instance
}

/** The first screen must not hide a missing server: say so once at start (issue #12). */
async function probeUpstream(i: Instance): Promise<void> {
  const url = i.holder.current.config.upstream.url
  try {
    const r = await request(`${url.replace(/\/+$/, '')}/server-info/`, {
      headersTimeout: 3000,
      bodyTimeout: 3000,
    })
    await r.body.dump()
  } catch (err) {
    const code = (err as { code?: string }).code ?? (err as Error).name
    i.logger.warn(
      { upstream: maskUrl(url), error: code },
      'the upstream does not answer: calls will get 502 until it does (set upstream.url, BASEGATE_UPSTREAM or --upstream; `npx basegate demo-upstream` serves a stand-in)'
    )
  }
}

async function listenAll(i: Instance): Promise<void> {
  const config = i.holder.current.config
  let proxyAddr: AddressInfo
  let adminAddr: AddressInfo
  try {
    proxyAddr = await listenOn(i.proxy, config.listen.port, config.listen.host)
    adminAddr = await listenOn(i.admin, config.admin.port, config.admin.host)
  } catch (err) {
    i.logger.fatal({ err }, 'cannot listen')
    i.logger.flush()
    process.exit(1)
  }
  i.logger.info(
    {
      proxy: { host: proxyAddr.address, port: proxyAddr.port },
      admin: { host: adminAddr.address, port: adminAddr.port },
      upstream: maskUrl(config.upstream.url),
      store: i.stores.kind,
      deployment: config.deployment,
      mode: config.mode,
    },
    'listening'
  )
}

/**
 * Reload on change: watch the folder, not the file, since editors and Kubernetes ConfigMaps
 * replace the file (a rename, or the `..data` symlink swap) rather than write into it.
 */
function watchConfig(i: Instance): FSWatcher | null {
  let debounce: NodeJS.Timeout | null = null
  const name = basename(i.file)
  try {
    const watcher = watch(dirname(i.file), (_event, changed) => {
      if (changed !== null && changed !== name && !String(changed).startsWith('..')) return
      if (debounce) clearTimeout(debounce)
      debounce = setTimeout(() => void i.reload('file change'), WATCH_DEBOUNCE_MS)
    })
    watcher.on('error', () => {})
    return watcher
  } catch (err) {
    i.logger.warn(
      { err },
      'cannot watch the configuration file; reload with SIGHUP or POST /v1/reload'
    )
    return null
  }
}

/** SPEC §7: every 60 s, the busiest keys and the teams past 80 % (warn at 100 %). */
function startSummary(i: Instance): NodeJS.Timeout {
  const timer = setInterval(
    () => {
      const line = i.summary.flush()
      if (line.teams_over_100.length > 0)
        i.logger.warn(line, 'usage summary: a team has used up its monthly quota')
      else i.logger.info(line, 'usage summary')
    },
    Number(process.env.BASEGATE_SUMMARY_MS ?? SUMMARY_MS)
  )
  timer.unref()
  return timer
}

/** SPEC §1/§6: stop accepting, let in-flight requests and tunnels finish (≤ 10 s), close the admin listener last. */
async function drain(i: Instance): Promise<void> {
  const deadline = Date.now() + DRAIN_MS
  const closed = new Promise<void>((resolve) => i.proxy.close(() => resolve()))
  // Keep-alive connections that finish their request are closed as they go idle.
  const sweep = setInterval(() => i.proxy.closeIdleConnections(), 50)
  i.proxy.closeIdleConnections()
  const tunnelsDone = (async () => {
    while (i.gateway.tunnels.size > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50))
  })()
  await Promise.race([
    Promise.all([closed, tunnelsDone]),
    new Promise((r) => setTimeout(r, DRAIN_MS)),
  ])
  clearInterval(sweep)
  i.proxy.closeAllConnections()
  for (const t of i.gateway.tunnels) t.destroy()
  i.serverVersion.stop()
  await i.recorder.stop().catch(() => {})
  await i.stores.overrides.close().catch(() => {})
  await i.stores.store.close().catch(() => {})
  await i.forwarder.close().catch(() => {})
  await new Promise<void>((resolve) => {
    i.admin.close(() => resolve())
    i.admin.closeAllConnections?.()
  })
}

function onSignals(i: Instance, cleanup: () => void): void {
  process.on('SIGHUP', () => void i.reload('SIGHUP'))
  const stop = async (signal: string): Promise<void> => {
    if (i.draining) return
    i.draining = true
    i.logger.info({ signal }, 'stopping: draining in-flight requests')
    cleanup()
    await drain(i)
    i.logger.info('stopped')
    i.logger.flush()
    setTimeout(() => process.exit(0), 20).unref()
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
  process.on('uncaughtException', (err) => {
    // A socket error escaping its handler must not take every other request down with it.
    i.logger.error({ err }, 'uncaught exception')
  })
}

async function main(): Promise<void> {
  const cli = await parseCli(process.argv.slice(2))
  if (cli === null) return
  const instance = await boot(cli)
  await listenAll(instance)
  void probeUpstream(instance)
  const watcher = watchConfig(instance)
  const summaryTimer = startSummary(instance)
  onSignals(instance, () => {
    watcher?.close()
    clearInterval(summaryTimer)
  })
}

void main()
