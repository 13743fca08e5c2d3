import { Cluster, Redis, type RedisOptions } from 'ioredis'
import { GuardedStore } from './limiter/guarded-store.js'
import { LeasingStore } from './limiter/leases.js'
import { MemoryStore } from './limiter/memory-store.js'
import { RedisStore } from './limiter/redis-store.js'
import type { Logger } from './observe/log.js'
import type { Metrics } from './observe/metrics.js'
import { MemoryOverrideStore, RedisOverrideStore, type OverrideStore } from './quota/overrides.js'
import { storeKindOf } from './config/build.js'
import type { Config, LimiterStore, StoreKind } from './types.js'
import { MemoryReportStore, RedisReportStore, type ReportStore } from './history/report-store.js'

export interface Stores {
  store: LimiterStore
  /** Where the admin API's team changes live (shared through Redis when there is one). */
  overrides: OverrideStore
  /** SPEC §8: the upgrade report's counters (shared through Redis when there is one). */
  report: ReportStore
  kind: StoreKind
}

/** The one place that picks the store implementation (memory, Redis, or Redis Cluster). */
export function createStore(config: Config, logger: Logger, metrics?: Metrics): Stores {
  const s = config.store
  const kind = storeKindOf(s)
  if (kind === 'memory') {
    logger.warn(
      'store.url is empty: counters are kept in this process only; instances do not share them'
    )
    return {
      store: new MemoryStore(),
      overrides: new MemoryOverrideStore(),
      report: new MemoryReportStore(),
      kind: 'memory',
    }
  }
  const client = redisClient(s, kind)
  // A diagnostic switch, not a setting: the caller's clock reproduces the behaviour before
  // issue #11 (each instance bucketing on its own clock), for the tests that prove the fix.
  const clock = process.env.BASEGATE_STORE_CLOCK === 'caller' ? 'caller' : 'store'
  const guarded = guardedRedisStore(client, config, logger, clock, metrics)
  // Leases sit outside the guard: a call a held share admits needs neither the over-limit
  // cache nor the store, and shares stay good while the store is down (they were charged).
  const store: LimiterStore = s.leases
    ? new LeasingStore(guarded, {
        clock,
        observe: metrics && {
          admitted: () => metrics.leaseAdmits.inc(),
          returned: (units) => metrics.leaseReturns.inc(units),
        },
      })
    : guarded
  // Pub/sub needs a connection of its own.
  const subscriber =
    client instanceof Cluster
      ? client.duplicate(undefined, { enableOfflineQueue: true })
      : client.duplicate({ enableOfflineQueue: true })
  subscriber.on('error', () => {})
  return {
    store,
    overrides: new RedisOverrideStore(client, subscriber, s.prefix),
    report: new RedisReportStore(client, s.prefix),
    kind,
  }
}

/** The ioredis client for the store (one connection, or a Cluster). */
function redisClient(s: Config['store'], kind: StoreKind): Redis | Cluster {
  const options: RedisOptions = {
    // SPEC §2 store.timeout_ms: a slower call counts as a store failure.
    commandTimeout: s.timeoutMs,
    connectTimeout: Math.max(1000, s.timeoutMs * 10),
    // Fail fast while disconnected, and never queue a script to run later: a call the gateway
    // has given up on (503, or a fallback decision) must not charge when Redis comes back
    // (issue #11). Boot waits for the connection before it takes traffic.
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    // Reconnect within half a second of Redis coming back (ioredis backs off to 2 s).
    retryStrategy: (times: number) => Math.min(times * 50, 500),
    // Requests arriving in the same tick share one write to Redis.
    enableAutoPipelining: true,
  }
  let client: Redis | Cluster
  if (kind === 'cluster') {
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
      enableOfflineQueue: false,
      redisOptions: {
        ...options,
        enableAutoPipelining: false,
        password: first.password ? decodeURIComponent(first.password) : undefined,
        username: first.username ? decodeURIComponent(first.username) : undefined,
        tls: first.protocol === 'rediss:' ? {} : undefined,
      },
    })
  } else {
    client = new Redis(s.url, options)
  }
  // ioredis reports every failed reconnect; the guarded store logs the outage once.
  client.on('error', () => {})
  return client
}

/** The Redis store behind its guard (over-limit cache, circuit breaker, on_error). */
function guardedRedisStore(
  client: Redis | Cluster,
  config: Config,
  logger: Logger,
  clock: 'store' | 'caller',
  metrics?: Metrics
): GuardedStore {
  const s = config.store
  return new GuardedStore(
    new RedisStore(client, {
      prefix: s.prefix,
      cluster: client instanceof Cluster,
      timeoutMs: s.timeoutMs,
      clock,
    }),
    {
      onError: s.onError,
      fallback: new MemoryStore(),
      onOutage: (down, err) => {
        if (down) logger.error({ err, on_error: s.onError }, 'store unavailable')
        else logger.info('store available again')
      },
      observe: metrics && {
        call: (seconds, ok) => {
          metrics.storeDuration.observe(seconds)
          if (!ok) metrics.storeErrors.inc()
        },
        fallback: () => metrics.fallbackDecisions.inc(),
        cached: () => metrics.cachedRefusals.inc(),
      },
    }
  )
}
