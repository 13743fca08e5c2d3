import { Writable } from 'node:stream'
import { afterAll, beforeAll } from 'vitest'
import { systemClock } from '../../src/clock.js'
import { loadConfigFile } from '../../src/config/load.js'
import { createLogger } from '../../src/observe/log.js'
import { bootCore } from '../../src/process/core.js'
import { logListening, probeUpstream } from '../../src/process/lifecycle.js'
import { runtimeOf } from '../../src/process/runtime.js'
import { listenAlone } from '../../src/process/serve-alone.js'
import { logLines, writeConfig, type Gateway } from './gateway-process.js'
import { startCluster, type TestCluster } from './redis-cluster.js'
import { startRedis, type TestRedis } from './redis.js'
import { startStubUpstream, type StubUpstream } from './stub-upstream.js'

// Issue #48: the gateway as `basegate` serves alone (its real proxy and admin listeners, the
// undici forwarder, the slow-client relay, the connection caps, the store of its file), in the
// test's own process: what a test of sockets and answers needs, without a process to start.
// What needs a process of its own stays in test/e2e/: signals, workers, its memory, its stdout.

/** The gateway of `yaml` (testYaml's loopback and free ports), up; `env` as the process's. */
export async function startLive(
  yaml: string,
  opts: { env?: NodeJS.ProcessEnv } = {}
): Promise<Gateway> {
  const configFile = writeConfig(yaml)
  const env = { ...process.env, LOG_LEVEL: 'debug', ...opts.env }
  const { runtime, problems } = runtimeOf(env, systemClock)
  if (problems.length > 0) throw new Error(JSON.stringify(problems))
  const loaded = await loadConfigFile(configFile, env)
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems))
  const { logs, waitForLog, addText } = logLines()
  // pino writes whole lines, one a write.
  const sink = new Writable({
    write(chunk, _e, cb) {
      addText(String(chunk))
      cb()
    },
  })
  const logger = createLogger({ level: runtime.logLevel, destination: sink })
  const core = await bootCore(
    { file: configFile, flags: {}, problems: [] },
    loaded.config,
    runtime,
    logger
  )
  const l = await listenAlone(core)
  // As serving alone does once it is up (serveUntilStopped, less the file watch, the summary
  // and the signals): the listening line, and the first word about the upstream.
  logListening(core, l.proxyAddress, l.adminAddress, 1)
  void probeUpstream(core)
  let stopped: Promise<number | null> | null = null
  return {
    port: l.proxyAddress.port,
    adminPort: l.adminAddress.port,
    url: `http://127.0.0.1:${l.proxyAddress.port}`,
    adminUrl: `http://127.0.0.1:${l.adminAddress.port}`,
    configFile,
    logs,
    waitForLog,
    stop: () => {
      if (stopped !== null) return stopped
      core.draining = true
      return (stopped = l.close().then(() => 0))
    },
  }
}

/**
 * A stub upstream and the gateways of `yaml(up, cluster, redis)` served in the test's process,
 * up for the `describe` block (or file) that calls it and stopped after it: the setup every live
 * file wrote by hand. `upstream` shapes the stub before the gateways start; `instances` of them
 * (1 by default) share one store; `cluster` starts a Redis Cluster of three nodes first, `redis`
 * a Redis (startRedis) the block reads beside the gateway.
 */
export function useLive(
  yaml: (
    up: StubUpstream,
    cluster: TestCluster | undefined,
    redis: TestRedis | undefined
  ) => string,
  opts: {
    env?: NodeJS.ProcessEnv
    upstream?: (up: StubUpstream) => void
    instances?: number
    cluster?: boolean
    redis?: boolean
  } = {}
): {
  readonly gw: Gateway
  readonly gws: readonly Gateway[]
  readonly up: StubUpstream
  readonly cluster: TestCluster
  readonly redis: TestRedis
} {
  let cluster: TestCluster | undefined
  let redis: TestRedis | undefined
  let up: StubUpstream | undefined
  const gws: Gateway[] = []
  beforeAll(async () => {
    if (opts.cluster) cluster = await startCluster()
    if (opts.redis) redis = await startRedis()
    up = await startStubUpstream()
    opts.upstream?.(up)
    const text = yaml(up, cluster, redis)
    for (let i = 0; i < (opts.instances ?? 1); i++)
      gws.push(await startLive(text, { env: opts.env }))
  }, 60_000)
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()))
    await up?.close()
    await cluster?.stop()
    await redis?.stop()
  })
  return {
    get gw() {
      return gws[0]!
    },
    gws,
    get up() {
      return up!
    },
    get cluster() {
      return cluster!
    },
    get redis() {
      return redis!
    },
  }
}
