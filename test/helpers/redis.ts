import { reapWithTest } from './reap.js'
import { freePort } from './ports.js'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis, type RedisOptions } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'

// Every Redis test runs against a real server: REDIS_URL when set, else a redis-server this
// helper starts on a free port, else a testcontainers container. If none can be had the
// suite fails saying so; it never skips and never mocks.

export interface TestRedis {
  url: string
  port: number
  /** A unique key prefix, so suites sharing a server never touch each other's keys. */
  prefix: string
  /** Kills the server (only for servers this helper started). */
  kill(): Promise<void>
  /** Restarts a killed server on the same port. */
  restart(): Promise<void>
  stop(): Promise<void>
}
function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0
}

export async function waitForPing(url: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let lastErr: unknown
  while (Date.now() < deadline) {
    const c = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    c.on('error', () => {})
    try {
      await c.connect()
      if ((await c.ping()) === 'PONG') {
        c.disconnect()
        return
      }
    } catch (err) {
      lastErr = err
    }
    c.disconnect()
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`redis at ${url} did not answer: ${String(lastErr)}`)
}

/**
 * Redis frozen for `ms` from the moment this resolves: every client's later commands wait, then
 * run in the order they came (CLIENT PAUSE ALL answers once it is in force). A DEBUG SLEEP gives
 * no sign that it has begun, so a test that used it had to guess with a fixed wait (issue #48).
 */
export async function freeze(admin: Redis, ms: number): Promise<void> {
  // A pause ends at the server's next cron tick: 100 ms late at its default 10 Hz, 10 at 100.
  await admin.call('CONFIG', 'SET', 'hz', '100')
  await admin.call('CLIENT', 'PAUSE', String(ms), 'ALL')
}

let counter = 0
function uniquePrefix(): string {
  return `bgtest:${process.pid}:${Date.now().toString(36)}:${counter++}:`
}

/**
 * Redis 7 refuses DEBUG (SLEEP: a frozen store) unless enabled; older servers do not know the
 * option (and allow DEBUG).
 */
let debugArgs: string[] | undefined
function enableDebug(): string[] {
  if (debugArgs === undefined) {
    const v = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout
    const major = Number(/v=(\d+)/.exec(v)?.[1] ?? 0)
    debugArgs = major >= 7 ? ['--enable-debug-command', 'local'] : []
  }
  return debugArgs
}

export function spawnRedisServer(port: number, extra: string[] = [], dir?: string): ChildProcess {
  const args = [
    ...enableDebug(),
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    ...extra,
  ]
  if (dir) args.push('--dir', dir)
  return reapWithTest(spawn('redis-server', args, { stdio: 'ignore' }))
}

/** Kills a server this helper started (SIGKILL), once it has exited. */
export function killChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill('SIGKILL')
  })
}

export async function startRedis(
  opts: { own?: boolean; persist?: boolean } = {}
): Promise<TestRedis> {
  const shared = process.env.REDIS_URL
  if (shared && !opts.own && !opts.persist) {
    await waitForPing(shared)
    const port = Number(new URL(shared).port || 6379)
    const nothing = async () => {
      throw new Error('kill/restart needs a server of the test own (startRedis({ own: true }))')
    }
    return {
      url: shared,
      port,
      prefix: uniquePrefix(),
      kill: nothing,
      restart: nothing,
      stop: async () => {},
    }
  }
  if (hasRedisServer()) {
    const port = await freePort()
    const dir = mkdtempSync(join(tmpdir(), 'bg-redis-'))
    // persist: every write on disk before it is answered, so a SIGKILL and a restart keep it.
    const extra = opts.persist ? ['--appendonly', 'yes', '--appendfsync', 'always'] : []
    let child = spawnRedisServer(port, extra, dir)
    const url = `redis://127.0.0.1:${port}`
    await waitForPing(url)
    return {
      url,
      port,
      prefix: uniquePrefix(),
      kill: () => killChild(child),
      restart: async () => {
        child = spawnRedisServer(port, extra, dir)
        await waitForPing(url)
      },
      stop: async () => {
        await killChild(child)
        rmSync(dir, { recursive: true, force: true })
      },
    }
  }
  try {
    const { GenericContainer } = await import('testcontainers')
    const container = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start()
    const port = container.getMappedPort(6379)
    const url = `redis://${container.getHost()}:${port}`
    await waitForPing(url)
    return {
      url,
      port,
      prefix: uniquePrefix(),
      kill: async () => void (await container.stop()),
      restart: async () => {
        throw new Error('restart is not supported on a testcontainers Redis')
      },
      stop: async () => void (await container.stop()),
    }
  } catch (err) {
    throw new Error(
      'No Redis for the tests: set REDIS_URL, install redis-server (apt-get install redis-server), ' +
        `or run a Docker engine for testcontainers. (${(err as Error).message})`
    )
  }
}

/** EVAL/EVALSHA calls the server has answered (its round trips for scripts). */
export async function evalCalls(c: Redis): Promise<number> {
  const info = await c.info('commandstats')
  return [...info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)].reduce(
    (a, m) => a + Number(m[1]),
    0
  )
}

/**
 * A real Redis for one test file, with the clients the file opens closed after it. Call at
 * the top level of the file.
 */
export function useRedis(opts: { own?: boolean } = {}): {
  readonly redis: TestRedis
  client(options?: RedisOptions): Redis
  track<T extends { disconnect(): void }>(c: T): T
} {
  let redis: TestRedis | undefined
  const open: { disconnect(): void }[] = []
  beforeAll(async () => {
    redis = await startRedis(opts)
  })
  afterAll(async () => {
    for (const c of open) c.disconnect()
    await redis?.stop()
  })
  return {
    get redis() {
      return redis!
    },
    client(options = {}) {
      const c = new Redis(redis!.url, { commandTimeout: 1000, ...options })
      c.on('error', () => {})
      open.push(c)
      return c
    },
    track(c) {
      open.push(c)
      return c
    },
  }
}

/** The process id of the redis-server on a port (to SIGSTOP it: a hung Redis). */
export function redisPid(port: number): number {
  const out = spawnSync('redis-cli', ['-p', String(port), 'INFO', 'server'], {
    encoding: 'utf8',
  }).stdout
  return Number(/process_id:(\d+)/.exec(out)![1])
}
