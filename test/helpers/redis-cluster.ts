import { spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'
import { freePort } from './ports.js'
import { killChild, spawnRedisServer, waitForPing } from './redis.js'

// A real three-node Redis Cluster on loopback (no replicas), made with `redis-cli --cluster
// create`. Nodes can be killed and restarted; they rejoin from their nodes.conf.

export interface TestCluster {
  urls: string[]
  ports: number[]
  kill(i: number): Promise<void>
  restart(i: number): Promise<void>
  stop(): Promise<void>
}

function startNode(port: number, dir: string, password?: string): ChildProcess {
  const cluster = ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`]
  const timing = ['--cluster-node-timeout', '1000', '--cluster-require-full-coverage', 'no']
  const auth = password === undefined ? [] : ['--requirepass', password, '--masterauth', password]
  return spawnRedisServer(port, [...cluster, ...timing, ...auth], dir)
}

async function clusterOk(port: number, password?: string): Promise<boolean> {
  const c = new Redis(port, '127.0.0.1', {
    password,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  c.on('error', () => {})
  try {
    await c.connect()
    const info = (await c.cluster('INFO')) as string
    return info.includes('cluster_state:ok')
  } catch {
    return false
  } finally {
    c.disconnect()
  }
}

export async function waitClusterOk(
  ports: number[],
  timeoutMs = 20_000,
  password?: string
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const states = await Promise.all(ports.map((p) => clusterOk(p, password)))
    if (states.every(Boolean)) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('the test Redis Cluster did not reach cluster_state:ok')
}

/** The node answers PING, or fails at once if its process exits first. */
function nodeUp(node: ChildProcess, url: string): Promise<void> {
  let exited = () => {}
  const died = new Promise<never>((_, reject) => {
    exited = () => reject(new Error(`the redis-server for ${url} exited`))
    node.once('exit', exited)
  })
  return Promise.race([waitForPing(url), died]).finally(() => node.off('exit', exited))
}

/**
 * Three nodes up on free ports. A port found free can be taken before the node binds it, and a
 * node binds its port + 10,000 too (the cluster bus), which another test's socket may hold: the
 * node then exits (a fresh clone's CI once lost the cluster suite so). Other ports then, up to
 * three tries.
 */
async function startNodes(
  dir: string,
  auth: string,
  password?: string
): Promise<{ ports: number[]; nodes: ChildProcess[] }> {
  for (let attempt = 1; ; attempt++) {
    const ports = [await freePort(), await freePort(), await freePort()]
    const nodes = ports.map((p) => startNode(p, dir, password))
    try {
      await Promise.all(ports.map((p, i) => nodeUp(nodes[i]!, `redis://${auth}127.0.0.1:${p}`)))
      return { ports, nodes }
    } catch (err) {
      await Promise.all(nodes.map(killChild))
      if (attempt >= 3) throw err
    }
  }
}

/** A cluster of three nodes; with `password`, every node requires it (URLs carry it). */
export async function startCluster(opts: { password?: string } = {}): Promise<TestCluster> {
  const { password } = opts
  const auth = password === undefined ? '' : `:${password}@`
  if (
    spawnSync('redis-server', ['--version']).status !== 0 ||
    spawnSync('redis-cli', ['--version']).status !== 0
  ) {
    throw new Error(
      'Redis Cluster tests need redis-server and redis-cli (apt-get install redis-server)'
    )
  }
  const dir = mkdtempSync(join(tmpdir(), 'bg-cluster-'))
  const { ports, nodes } = await startNodes(dir, auth, password)
  const create = spawnSync(
    'redis-cli',
    [
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
      ...(password === undefined ? [] : ['-a', password, '--no-auth-warning']),
    ],
    {
      encoding: 'utf8',
      timeout: 30_000,
    }
  )
  if (create.status !== 0)
    throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`)
  await waitClusterOk(ports, undefined, password)
  const kill = (i: number) =>
    new Promise<void>((resolve) => {
      const n = nodes[i]!
      if (n.exitCode !== null || n.signalCode !== null) return resolve()
      n.once('exit', () => resolve())
      n.kill('SIGKILL')
    })
  return {
    urls: ports.map((p) => `redis://${auth}127.0.0.1:${p}`),
    ports,
    kill,
    restart: async (i) => {
      nodes[i] = startNode(ports[i]!, dir, password)
      await waitForPing(`redis://${auth}127.0.0.1:${ports[i]}`)
      await waitClusterOk(ports, undefined, password)
    },
    stop: async () => {
      await Promise.all(nodes.map((_, i) => kill(i)))
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/**
 * A cluster for one test file: started before its tests, stopped after, with a `client()` that
 * connects as src/deps.ts does (no auto-pipelining in Cluster mode: redis/ioredis#2109).
 */
export function useCluster(): { readonly cluster: TestCluster; client(): Cluster } {
  let cluster: TestCluster | undefined
  const clients: Cluster[] = []
  beforeAll(async () => {
    cluster = await startCluster()
  }, 60_000)
  afterAll(async () => {
    for (const c of clients) c.disconnect()
    await cluster?.stop()
  })
  return {
    get cluster() {
      return cluster!
    },
    client() {
      const nodes = cluster!.urls.map((u) => ({ host: '127.0.0.1', port: Number(new URL(u).port) }))
      const c = new Cluster(nodes, {
        enableAutoPipelining: false,
        redisOptions: { commandTimeout: 2000 },
      })
      c.on('error', () => {})
      clients.push(c)
      return c
    },
  }
}

/** The cluster's nodes as limits.yaml's `store.cluster` list: `["redis://…", …]`. */
export const clusterList = (c: TestCluster): string => `[${c.urls.map((u) => `"${u}"`).join(', ')}]`
