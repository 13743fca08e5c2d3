import { Cluster, type Redis } from 'ioredis'
import type { Clock } from './clock.js'
import { GuardedStore } from './limiter/guarded-store.js'
import { LeasingStore } from './limiter/leases.js'
import { MemoryStore } from './limiter/memory-store.js'
import { lastConnectionError, redisClient, storeKindOf } from './limiter/redis-client.js'
import { answerWithin, RedisStore } from './limiter/redis-store.js'
import type { Logger } from './observe/log.js'
import type { Metrics } from './observe/metrics.js'
import { MemoryChangeStore, RedisChangeStore, type ChangeStore } from './config/changes.js'
import type { Config, Ledger, StoreKind, Windows } from './types.js'
import { MemoryReportStore, RedisReportStore, type ReportStore } from './history/report-store.js'
import { MemoryUsageStore, RedisUsageStore, type UsageStore } from './usage/store.js'
import { MemoryShapeStore, RedisShapeStore, type ShapeStore } from './tuning/shape-store.js'

export interface Stores {
  /** The rate windows, behind the guard and the leases where the store is Redis. */
  windows: Windows
  /** SPEC §5: the team-months, the shared store's own (no guard, no fallback). */
  ledger: Ledger
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
  /**
   * SPEC §4: a small write to the store: null when it landed, else the store's words (a store
   * that answers PING but refuses writes, `OOM`, `READONLY`, `MISCONF`, is failing).
   */
  probe(): Promise<string | null>
}

/** What a failed store call says: the store's own reply (`OOM …`), else the socket's error. */
export function storeWords(err: unknown, client?: Redis | Cluster): string {
  const e = (err as { cause?: unknown } | null)?.cause ?? err
  const reply = e as { name?: string; message?: string } | null
  if (reply?.name === 'ReplyError' && typeof reply.message === 'string')
    return reply.message.split('\n')[0]!
  const socket = client === undefined ? undefined : lastConnectionError(client)
  if (socket !== undefined && client?.status !== 'ready') return socket
  const message = (e as { message?: unknown } | null)?.message
  return typeof message === 'string' ? message.split('\n')[0]! : String(e)
}

/** How long a probe may take before the store counts as not answering it. */
const PROBE_TIMEOUT_MS = 1_000

/** The probe: `SET <prefix>probe` with a short expiry, within PROBE_TIMEOUT_MS. */
function probeOf(
  client: Redis | Cluster,
  prefix: string,
  clock: Clock
): () => Promise<string | null> {
  return async () => {
    try {
      await answerWithin(client.set(`${prefix}probe`, '1', 'PX', 15_000), PROBE_TIMEOUT_MS, clock)
      return null
    } catch (err) {
      return storeWords(err, client)
    }
  }
}

/** The one place that picks the store implementation (memory, Redis, or Redis Cluster). */
export function createStore(
  config: Config,
  logger: Logger,
  clock: Clock,
  metrics?: Metrics,
  /** Every rate-limit store call's end: null when it answered, else the store's words. */
  onCall?: (error: string | null) => void
): Stores {
  const s = config.store
  const kind = storeKindOf(s)
  if (kind === 'memory') {
    logger.warn(
      'store.url is empty: counters are kept in this process only; instances do not share them'
    )
    const usage = new MemoryUsageStore()
    metrics?.watchUsageForgotten(() => usage.forgotten)
    const store = new MemoryStore({ maxKeys: s.memoryKeys })
    metrics?.watchMemoryDropped(() => store.dropped)
    return {
      windows: store,
      ledger: store,
      changes: new MemoryChangeStore(),
      report: new MemoryReportStore(),
      usage,
      shapes: new MemoryShapeStore(),
      kind: 'memory',
      connectionError: () => undefined,
      probe: async () => null,
    }
  }
  const client = redisClient(s)
  const redis = new RedisStore(client, {
    prefix: s.prefix,
    cluster: client instanceof Cluster,
    timeoutMs: s.timeoutMs,
    clock,
  })
  const guarded = guardedWindows(redis, client, config, clock, metrics, onCall)
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
  // Pub/sub needs a connection of its own.
  const subscriber =
    client instanceof Cluster
      ? client.duplicate(undefined, { enableOfflineQueue: true })
      : client.duplicate({ enableOfflineQueue: true })
  subscriber.on('error', () => {})
  return {
    windows: leasing ?? guarded,
    ledger: redis,
    changes: new RedisChangeStore(client, subscriber, s.prefix),
    report: new RedisReportStore(client, s.prefix),
    usage: new RedisUsageStore(client, s.prefix),
    shapes: new RedisShapeStore(client, s.prefix),
    kind,
    connectionError: () => lastConnectionError(client),
    probe: probeOf(client, s.prefix, clock),
  }
}

/** The Redis store's windows behind their guard (over-limit cache, circuit breaker, on_error). */
function guardedWindows(
  redis: RedisStore,
  client: Redis | Cluster,
  config: Config,
  clock: Clock,
  metrics?: Metrics,
  onCall?: (error: string | null) => void
): GuardedStore {
  const s = config.store
  const fallback = new MemoryStore({ maxKeys: s.memoryKeys })
  metrics?.watchMemoryDropped(() => fallback.dropped)
  return new GuardedStore(redis, {
    onError: s.onError,
    clock,
    fallback,
    // The store's state (its episodes told once each, observe/store-state.ts) is fed every
    // call's end: the store's own words (`OOM …`) where it refused, the socket's otherwise.
    observe: {
      call: (seconds, ok, err) => {
        metrics?.storeDuration.observe(seconds)
        if (!ok) metrics?.storeErrors.inc()
        onCall?.(ok ? null : storeWords(err, client))
      },
      fallback: () => metrics?.fallbackDecisions.inc(),
      cached: () => metrics?.cachedRefusals.inc(),
    },
  })
}
