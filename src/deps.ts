import { Cluster, type Redis } from 'ioredis'
import type { Clock } from './clock.js'
import { GuardedStore } from './limiter/guarded-store.js'
import { LeasingStore } from './limiter/leases.js'
import { MemoryStore } from './limiter/memory-store.js'
import {
  lastConnectionError,
  redisClient,
  storeAddress,
  storeKindOf,
} from './limiter/redis-client.js'
import { RedisStore } from './limiter/redis-store.js'
import type { Logger } from './observe/log.js'
import type { Metrics } from './observe/metrics.js'
import { MemoryChangeStore, RedisChangeStore, type ChangeStore } from './config/changes.js'
import type { Config, LimiterStore, StoreKind } from './types.js'
import { MemoryReportStore, RedisReportStore, type ReportStore } from './history/report-store.js'
import { MemoryUsageStore, RedisUsageStore, type UsageStore } from './usage/store.js'
import { MemoryShapeStore, RedisShapeStore, type ShapeStore } from './tuning/shape-store.js'

export interface Stores {
  store: LimiterStore
  /** Where the admin API's team changes live (shared through Redis when there is one). */
  changes: ChangeStore
  /** SPEC §8: the upgrade report's counters (shared through Redis when there is one). */
  report: ReportStore
  /** SPEC §5: calls per day of each team and base, and the month's notices (shared likewise). */
  usage: UsageStore
  /** SPEC §11: how keys' calls fell in time, 35 days. */
  shapes: ShapeStore
  kind: StoreKind
  /** The store connection's last error (`connect ECONNREFUSED …`), for the lines that say it is down. */
  connectionError(): string | undefined
}

/** The one place that picks the store implementation (memory, Redis, or Redis Cluster). */
export function createStore(
  config: Config,
  logger: Logger,
  clock: Clock,
  metrics?: Metrics
): Stores {
  const s = config.store
  const kind = storeKindOf(s)
  if (kind === 'memory') {
    logger.warn(
      'store.url is empty: counters are kept in this process only; instances do not share them'
    )
    const usage = new MemoryUsageStore()
    metrics?.watchUsageForgotten(() => usage.forgotten)
    return {
      store: new MemoryStore(),
      changes: new MemoryChangeStore(),
      report: new MemoryReportStore(),
      usage,
      shapes: new MemoryShapeStore(),
      kind: 'memory',
      connectionError: () => undefined,
    }
  }
  const client = redisClient(s)
  const guarded = guardedRedisStore(client, config, logger, clock, metrics)
  // Leases sit outside the guard: a call a held share admits needs neither the over-limit
  // cache nor the store, and shares stay good while the store is down (they were charged).
  const leasing = s.leases
    ? new LeasingStore(guarded, {
        clock,
        observe: metrics && {
          admitted: () => metrics.leaseAdmits.inc(),
          returned: (units) => metrics.leaseReturns.inc(units),
        },
      })
    : null
  if (leasing !== null) metrics?.watchLeases(() => leasing.heldUnits)
  const store: LimiterStore = leasing ?? guarded
  // Pub/sub needs a connection of its own.
  const subscriber =
    client instanceof Cluster
      ? client.duplicate(undefined, { enableOfflineQueue: true })
      : client.duplicate({ enableOfflineQueue: true })
  subscriber.on('error', () => {})
  return {
    store,
    changes: new RedisChangeStore(client, subscriber, s.prefix),
    report: new RedisReportStore(client, s.prefix),
    usage: new RedisUsageStore(client, s.prefix),
    shapes: new RedisShapeStore(client, s.prefix),
    kind,
    connectionError: () => lastConnectionError(client),
  }
}

/** The Redis store behind its guard (over-limit cache, circuit breaker, on_error). */
function guardedRedisStore(
  client: Redis | Cluster,
  config: Config,
  logger: Logger,
  clock: Clock,
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
      clock,
      fallback: new MemoryStore(),
      onOutage: (down, err) => {
        const store = storeAddress(s)
        if (!down) return logger.info({ store }, 'store available again')
        // Issue #34: the store's address and the socket's own error, not the client's wording
        // of a refused command (and no stack: it says nothing an operator can act on).
        const error = lastConnectionError(client) ?? (err as Error | undefined)?.message
        logger.error({ store, error, on_error: s.onError }, 'store unavailable')
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
