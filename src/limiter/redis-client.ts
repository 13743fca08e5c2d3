import { Cluster, Redis, type RedisOptions } from 'ioredis'
import { maskUrl } from '../mask-url.js'
import type { Config, StoreKind } from '../types.js'

// The one place an ioredis client for the store is made: the gateway's and the upgrade-report
// command's alike, so a Cluster's password, user and TLS reach every connection.

/** The store a configuration runs on (store.url and store.cluster are never both set). */
export function storeKindOf(store: Config['store']): StoreKind {
  if (store.cluster.length > 0) return 'cluster'
  return store.url === '' ? 'memory' : 'redis'
}

/** The ioredis client for the store (one connection, or a Cluster). */
export function redisClient(
  s: Config['store'],
  opts: { offlineQueue?: boolean; commandTimeoutMs?: number } = {}
): Redis | Cluster {
  const options: RedisOptions = {
    // SPEC §2 store.timeout_ms is enforced per rate-limit call by RedisStore (answerWithin),
    // which never counts a reply its own late event loop failed to read in time; this is the
    // backstop for every other command (team changes, the report, probes).
    commandTimeout: opts.commandTimeoutMs ?? Math.max(1000, s.timeoutMs * 10),
    connectTimeout: Math.max(1000, s.timeoutMs * 10),
    // Fail fast while disconnected, and never queue a script to run later: a call the gateway
    // has given up on (503, or a fallback decision) must not charge when Redis comes back
    // (issue #11). Boot waits for the connection before it takes traffic.
    maxRetriesPerRequest: 0,
    enableOfflineQueue: opts.offlineQueue ?? false,
    // Reconnect within half a second of Redis coming back (ioredis backs off to 2 s).
    retryStrategy: (times: number) => Math.min(times * 50, 500),
    // The store writes a turn's check scripts as one write itself (redis-store.ts
    // writeChecks): auto-pipelining held a turn's calls while the batch before was unanswered.
    enableAutoPipelining: false,
  }
  let client: Redis | Cluster
  if (storeKindOf(s) === 'cluster') {
    const nodes = s.cluster.map((u) => {
      const url = new URL(u)
      return { host: url.hostname, port: Number(url.port || 6379) }
    })
    const first = new URL(s.cluster[0]!)
    client = new Cluster(nodes, {
      // Not in Cluster mode: ioredis picks an auto-pipeline's slot from the command's first
      // argument, which for a script is its key count, so scripts for different slots get
      // batched and rejected ("All keys in the pipeline should belong to the same slots
      // allocation group", redis/ioredis#2109).
      enableAutoPipelining: false,
      enableOfflineQueue: opts.offlineQueue ?? false,
      redisOptions: {
        ...options,
        password: first.password ? decodeURIComponent(first.password) : undefined,
        username: first.username ? decodeURIComponent(first.username) : undefined,
        tls: first.protocol === 'rediss:' ? {} : undefined,
      },
    })
  } else {
    client = new Redis(s.url, options)
  }
  // ioredis reports every failed reconnect; the guarded store logs the outage once, naming the
  // last of these (the socket's own error: ECONNREFUSED, ETIMEDOUT, a TLS or auth failure).
  client.on('error', (err: NodeJS.ErrnoException) => LAST_ERROR.set(client, describeError(err)))
  return client
}

const LAST_ERROR = new WeakMap<Redis | Cluster, string>()

function describeError(err: NodeJS.ErrnoException): string {
  const text = err.message || String(err)
  return err.code !== undefined && !text.includes(err.code) ? `${err.code}: ${text}` : text
}

/** The client's last connection error (`connect ECONNREFUSED 127.0.0.1:6379`), if any. */
export function lastConnectionError(client: Redis | Cluster): string | undefined {
  return LAST_ERROR.get(client)
}

/** Where the store is, for a log line: its URL (or a Cluster's seeds), credentials masked. */
export function storeAddress(s: Config['store']): string {
  if (storeKindOf(s) === 'cluster') return `cluster ${s.cluster.map(maskUrl).join(', ')}`
  return maskUrl(s.url)
}
