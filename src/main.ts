#!/usr/bin/env node
import { createAdaptorServer } from '@hono/node-server'
import { watch, type FSWatcher } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { basename, dirname } from 'node:path'
import type { AddressInfo } from 'node:net'
import { parseArgs } from 'node:util'
import { createAdminApp } from './admin/routes.js'
import { createGateway } from './app.js'
import { ConfigHolder } from './config/holder.js'
import { formatProblems, loadConfigFile } from './config/load.js'
import { parseFlagOverrides } from './config/overrides.js'
import { createStore } from './deps.js'
import { createForwarder } from './http/proxy.js'
import { createLogger } from './observe/log.js'
import { Metrics } from './observe/metrics.js'
import { UsageSummary } from './observe/summary.js'
import type { ConfigProblem } from './types.js'

const USAGE = `usage: basegate [--config FILE] [--port N] [--upstream URL] [--redis URL]
  --config FILE   limits.yaml to serve with (default: $BASEGATE_CONFIG, else ./limits.yaml)
  --port N        the proxy's port (beats listen.port)
  --upstream URL  the service's server (beats upstream.url)
  --redis URL     redis:// or rediss:// store (beats store.url)`

const DRAIN_MS = 10_000
const SUMMARY_MS = 60_000
const WATCH_DEBOUNCE_MS = 250

function fail(problems: readonly ConfigProblem[]): never {
  process.stderr.write(formatProblems(problems) + '\n')
  process.exit(2)
}

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}

async function main(): Promise<void> {
  let args
  try {
    args = parseArgs({
      options: {
        config: { type: 'string' },
        port: { type: 'string' },
        upstream: { type: 'string' },
        redis: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }).values
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`)
    process.exit(2)
  }
  if (args.help) {
    process.stdout.write(USAGE + '\n')
    return
  }
  const file = args.config ?? process.env.BASEGATE_CONFIG ?? './limits.yaml'
  const flags = parseFlagOverrides(args)
  const loaded = await loadConfigFile(file)
  const problems = [...flags.problems, ...(loaded.ok ? [] : loaded.problems)]
  if (!loaded.ok || problems.length > 0) fail(problems)

  const logger = createLogger()
  const metrics = new Metrics()
  const summary = new UsageSummary()
  const holder = new ConfigHolder(file, loaded.config, flags.overrides)
  const config = holder.current.config
  const { store, overrides, kind } = createStore(config, logger, metrics)

  // Team changes made through any instance's admin API (kept in the store).
  const refreshTeams = async (): Promise<void> => {
    try {
      holder.setTeamOverrides(await overrides.load())
    } catch (err) {
      logger.warn(
        { err: { message: (err as Error).message } },
        'team changes could not be read from the store; the file values apply'
      )
    }
  }
  await refreshTeams()
  overrides.onChange(() => void refreshTeams())

  const reload = async (source: string) => {
    const r = await holder.reload()
    if (r.ok) logger.info({ file, source }, 'configuration reloaded')
    else
      logger.error(
        { file, source, problems: r.problems.map((p) => `${p.field}: ${p.message}`) },
        'configuration refused; the running one stays'
      )
    return r
  }
  const forwarder = createForwarder({
    url: config.upstream.url,
    timeoutMs: config.upstream.timeoutMs,
  })
  const gateway = createGateway({
    snapshot: () => holder.current,
    store,
    forwarder,
    logger,
    upstreamUrl: config.upstream.url,
    metrics,
    summary,
  })

  // Slowloris: a request head (and a whole request) must arrive in time. Node checks these
  // timers only every connectionsCheckingInterval (30 s by default): check often enough that
  // the limits mean what they say.
  const { headersTimeoutMs, requestTimeoutMs } = config.listen
  const proxy = createServer(
    {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.max(
        50,
        Math.min(1000, Math.floor(Math.min(headersTimeoutMs, requestTimeoutMs || Infinity) / 4))
      ),
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
  const admin = createAdaptorServer({
    fetch: createAdminApp({ holder, store, overrides, metrics, reload: () => reload('admin') })
      .fetch,
  }) as Server

  let proxyAddr: AddressInfo
  let adminAddr: AddressInfo
  try {
    proxyAddr = await listen(proxy, config.listen.port, config.listen.host)
    adminAddr = await listen(admin, config.admin.port, config.admin.host)
  } catch (err) {
    logger.fatal({ err: { message: (err as Error).message } }, 'cannot listen')
    logger.flush()
    process.exit(1)
  }
  logger.info(
    {
      proxy: { host: proxyAddr.address, port: proxyAddr.port },
      admin: { host: adminAddr.address, port: adminAddr.port },
      upstream: config.upstream.url,
      store: kind,
      deployment: config.deployment,
      mode: config.mode,
    },
    'listening'
  )

  process.on('SIGHUP', () => void reload('SIGHUP'))

  // Reload on change: watch the folder, not the file, since editors and Kubernetes ConfigMaps
  // replace the file (a rename, or the `..data` symlink swap) rather than write into it.
  let watcher: FSWatcher | null = null
  let debounce: NodeJS.Timeout | null = null
  try {
    const name = basename(file)
    watcher = watch(dirname(file), (_event, changed) => {
      if (changed !== null && changed !== name && !String(changed).startsWith('..')) return
      if (debounce) clearTimeout(debounce)
      debounce = setTimeout(() => void reload('file change'), WATCH_DEBOUNCE_MS)
    })
    watcher.on('error', () => {})
  } catch (err) {
    logger.warn(
      { err: { message: (err as Error).message } },
      'cannot watch the configuration file; reload with SIGHUP or POST /v1/reload'
    )
  }

  // SPEC §7: every 60 s, the busiest keys and the teams past 80 % (warn at 100 %).
  const summaryTimer = setInterval(
    () => {
      const line = summary.flush()
      if (line.teams_over_100.length > 0)
        logger.warn(line, 'usage summary: a team has used up its monthly quota')
      else logger.info(line, 'usage summary')
    },
    Number(process.env.BASEGATE_SUMMARY_MS ?? SUMMARY_MS)
  )
  summaryTimer.unref()

  let stopping = false
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'stopping: draining in-flight requests')
    watcher?.close()
    clearInterval(summaryTimer)
    const deadline = Date.now() + DRAIN_MS
    const closed = new Promise<void>((resolve) => proxy.close(() => resolve()))
    // Keep-alive connections that finish their request are closed as they go idle.
    const sweep = setInterval(() => proxy.closeIdleConnections(), 50)
    proxy.closeIdleConnections()
    const waitTunnels = async (): Promise<void> => {
      while (gateway.tunnels.size > 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50))
    }
    await Promise.race([
      Promise.all([closed, waitTunnels()]),
      new Promise((r) => setTimeout(r, DRAIN_MS)),
    ])
    clearInterval(sweep)
    proxy.closeAllConnections()
    for (const t of gateway.tunnels) t.destroy()
    await overrides.close().catch(() => {})
    await store.close().catch(() => {})
    await forwarder.close().catch(() => {})
    // SPEC §6: the admin listener closes last.
    await new Promise<void>((resolve) => {
      admin.close(() => resolve())
      admin.closeAllConnections?.()
    })
    logger.info('stopped')
    logger.flush()
    setTimeout(() => process.exit(0), 20).unref()
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
  process.on('uncaughtException', (err) => {
    // A socket error escaping its handler must not take every other request down with it.
    logger.error({ err: { message: err.message, stack: err.stack } }, 'uncaught exception')
  })
}

void main()
