import type { OutcomeKind } from '../http/call.js'
import { columnOf, type RefusalReason } from '../http/outcomes.js'
import type { ProtectState } from '../protect/protector.js'
import { CallHistogram } from './call-histogram.js'
import {
  AggregatorRegistry,
  collectDefaultMetrics,
  Counter,
  Gauge,
  Registry,
  type Aggregator,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client'

export type { RefusalReason } from '../http/outcomes.js'

/** The refusal an outcome stands for, if any (http/outcomes.ts). */
export const REFUSAL_OF = columnOf('refusal')

/** One labelled metric in a registry (a Counter or a Gauge), declared in one line. */
function metric<L extends string, M>(
  Kind: new (c: {
    name: string
    help: string
    labelNames: readonly L[]
    registers: Registry[]
    aggregator: Aggregator
    collect?: () => void
  }) => M,
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
  aggregator: Aggregator,
  collect?: () => void
): M {
  return new Kind({ name, help, labelNames, registers: [registry], aggregator, collect })
}
/** `collect` runs before each read of the counter (a scrape, a worker's report). */
const counter = <L extends string>(
  r: Registry,
  name: string,
  help: string,
  labels: readonly L[],
  collect?: () => void
) => metric<L, Counter<L>>(Counter, r, name, help, labels, 'sum', collect)
/**
 * Gauges here are states every process reports alike (a team's usage read from the store, the
 * version in force), so across worker processes they merge by max (min for "last reload ok").
 */
const gauge = <L extends string>(
  r: Registry,
  name: string,
  help: string,
  labels: readonly L[],
  aggregator: Aggregator = 'max'
) => metric<L, Gauge<L>>(Gauge, r, name, help, labels, aggregator)

/**
 * Counts by two labels in plain nested maps (no label string built per call), handed to
 * prom-client at each read: a labelled child's inc() hashes its labels on every call (issue
 * #26: 2–3 % of a refusal).
 */
class PairCounts<A, B> {
  private readonly byA = new Map<A, Map<B, number>>()

  add(a: A, b: B): void {
    let byB = this.byA.get(a)
    if (byB === undefined) this.byA.set(a, (byB = new Map()))
    byB.set(b, (byB.get(b) ?? 0) + 1)
  }

  /** Every count since the last drain, then none. */
  drain(each: (a: A, b: B, n: number) => void): void {
    for (const [a, byB] of this.byA) for (const [b, n] of byB) each(a, b, n)
    this.byA.clear()
  }
}

/** Every metric basegate exposes, in one registry (SPEC §7 /metrics). */
export class Metrics {
  readonly registry = new Registry()
  // Counted per request in plain maps and handed to prom-client at each read (collect).
  private readonly pendingRequests = new PairCounts<string, string>()
  private readonly pendingRefusals = new Map<RefusalReason, number>()
  readonly requests: Counter<'class' | 'outcome'> = counter(
    this.registry,
    'basegate_requests_total',
    'Requests by class and outcome',
    ['class', 'outcome'] as const,
    () =>
      this.pendingRequests.drain((cls, outcome, n) => this.requests.inc({ class: cls, outcome }, n))
  )
  /** Answers by class and status code (counted at scrape from a plain map, as requests are). */
  private readonly pendingResponses = new PairCounts<string, number>()
  readonly responses: Counter<'class' | 'code'> = counter(
    this.registry,
    'basegate_responses_total',
    "Answers by class and HTTP status code (the upstream's, or basegate's own; 0: the client left first)",
    ['class', 'code'] as const,
    () =>
      this.pendingResponses.drain((cls, code, n) =>
        this.responses.inc({ class: cls, code: String(code) }, n)
      )
  )
  readonly refusals: Counter<'reason'> = counter(
    this.registry,
    'basegate_refusals_total',
    'Refusals by reason (dry_run: would have been refused, forwarded)',
    ['reason'] as const,
    () => {
      for (const [reason, n] of this.pendingRefusals) this.refusals.inc({ reason }, n)
      this.pendingRefusals.clear()
    }
  )
  readonly storeDuration = new CallHistogram(
    'basegate_store_duration_seconds',
    'Duration of one rate-limit store call',
    [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
    this.registry
  )
  readonly storeErrors = counter(
    this.registry,
    'basegate_store_errors_total',
    'Store calls that failed or timed out',
    [] as const
  )
  readonly fallbackDecisions = counter(
    this.registry,
    'basegate_store_fallback_decisions_total',
    'Decisions taken by the local limiter while the store failed (on_error: open)',
    [] as const
  )
  readonly cachedRefusals = counter(
    this.registry,
    'basegate_cached_refusals_total',
    'Refusals answered from the local over-limit cache, without a store call',
    [] as const
  )
  readonly leaseAdmits = counter(
    this.registry,
    'basegate_lease_admits_total',
    'Calls admitted from a share of a hot key this process leased (store.leases), without a store call',
    [] as const
  )
  /** Read at each scrape: the calls of shares this process holds (set by watchLeases). */
  private leaseUnitsHeld: () => number = () => 0
  readonly leaseHeld = new Gauge({
    name: 'basegate_lease_calls_held',
    help: 'Calls of leased shares this process holds now: charged in the store, not yet admitted (a SIGKILL loses them for the rest of their bucket)',
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      this.leaseHeld.set(this.leaseUnitsHeld())
    },
  })
  readonly leaseReturns = counter(
    this.registry,
    'basegate_lease_returned_total',
    'Calls of leased shares given back unused when their bucket ended',
    [] as const
  )
  readonly bodySpills = counter(
    this.registry,
    'basegate_body_spilled_total',
    'Checked bodies held in a temporary file because size_limits.buffer_bytes was in use (SPEC §4)',
    [] as const
  )
  readonly bodyRefusals = counter(
    this.registry,
    'basegate_body_refusals_total',
    'Calls refused for a held-body bound or a slow body (SPEC §4), by bound: client_share, spill_bytes (memory and disk full), disk (a temporary file failed), body_timeout, min_body_rate',
    ['bound'] as const
  )
  /** Read at each scrape: the bytes of checked bodies held now (set by watchHeldBodies). */
  private heldBodies: () => { memory: number; disk: number } = () => ({ memory: 0, disk: 0 })
  readonly bodyBufferedBytes = new Gauge({
    name: 'basegate_body_buffered_bytes',
    help: 'Bytes of checked bodies held in memory now (bounded by size_limits.buffer_bytes)',
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      this.bodyBufferedBytes.set(this.heldBodies().memory)
    },
  })
  readonly bodySpilledBytes = new Gauge({
    name: 'basegate_body_spilled_bytes',
    help: 'Bytes of checked bodies held in temporary files now (bounded by size_limits.spill_bytes)',
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      this.bodySpilledBytes.set(this.heldBodies().disk)
    },
  })
  readonly connectionsRefused = counter(
    this.registry,
    'basegate_connections_refused_total',
    'Client connections closed at once past a cap (SPEC §4), by cap: max_connections, max_connections_per_client, pipelined (more than 16 pipelined requests waiting)',
    ['cap'] as const
  )
  readonly connectionsYielded = counter(
    this.registry,
    'basegate_connections_yielded_total',
    'Idle client connections closed to admit a newcomer at listen.max_connections (SPEC §4: the client holding the most yields first)',
    [] as const
  )
  /** Read at each scrape: the client connections this process counts now. */
  private openConnections: () => number = () => 0
  readonly connectionsOpen = new Gauge({
    name: 'basegate_connections_open',
    help: 'Client connections open now on the proxy port (bounded by listen.max_connections)',
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      this.connectionsOpen.set(this.openConnections())
    },
  })
  /** Read at each scrape: this process's upstream shares (SPEC §4). */
  private shares: () => { in_use: number; waiting: number; busy: number } | null = () => null
  readonly upstreamInUse = new Gauge({
    name: 'basegate_upstream_connections_in_use',
    help: 'Upstream connections held by calls now (bounded by upstream.max_connections per process)',
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      const s = this.shares()
      if (s !== null) this.upstreamInUse.set(s.in_use)
    },
  })
  readonly upstreamShareWaiting = new Gauge({
    name: 'basegate_upstream_share_waiting',
    help: "Calls waiting for one of their client's own upstream connections now",
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      const s = this.shares()
      if (s !== null) this.upstreamShareWaiting.set(s.waiting)
    },
  })
  /** Read at each scrape: bases the in-memory usage store forgot to stay within its bound. */
  private usageForgotten: () => number = () => 0
  readonly usageBasesForgotten = new Gauge({
    name: 'basegate_usage_bases_forgotten_total',
    help: 'Bases whose day counts the in-memory usage store forgot (the one written longest ago first) to stay within its bound of 50,000 (SPEC §5; Redis keeps every base 400 days)',
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      this.usageBasesForgotten.set(this.usageForgotten())
    },
  })
  /** Read at each scrape: windows the in-memory store dropped to stay within store.memory_keys. */
  private memoryDropped: () => number = () => 0
  readonly storeMemoryDropped = new Gauge({
    name: 'basegate_store_memory_dropped_total',
    help: 'Rate windows the in-memory store dropped (the one idle longest first) to stay within store.memory_keys (SPEC §4); a flood of one-off keys shows here',
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      this.storeMemoryDropped.set(this.memoryDropped())
    },
  })
  /** Read at each scrape: whether the store answers (observe/store-state.ts). */
  private storeUp: () => boolean = () => true
  readonly storeUpGauge = new Gauge({
    name: 'basegate_store_up',
    help: '1 while the store answers, 0 while it is failing (its calls fail or it refuses writes: OOM, READONLY, MISCONF); probed every 5 s, traffic or not. The in-memory store is always 1',
    registers: [this.registry],
    aggregator: 'min',
    collect: () => {
      this.storeUpGauge.set(this.storeUp() ? 1 : 0)
    },
  })
  /** Read at each scrape: whether the server answers (the status recorder's state). */
  private upstreamUp: () => boolean = () => true
  readonly upstreamUpGauge = new Gauge({
    name: 'basegate_upstream_up',
    help: '1 while the server answers, 0 while it is failing (3 failed calls in a row, or half of at least 4 calls over 10 s: 5xx, 502, 504)',
    registers: [this.registry],
    aggregator: 'min',
    collect: () => {
      this.upstreamUpGauge.set(this.upstreamUp() ? 1 : 0)
    },
  })
  readonly upstreamDuration = new CallHistogram(
    'basegate_upstream_duration_seconds',
    'Time from dispatch to the upstream response headers',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    this.registry
  )
  // SPEC §9: the server's protection, read from this process's protector at each scrape.
  private protect: () => ProtectState | null = () => null
  readonly protectCeiling = new Gauge({
    name: 'basegate_protect_ceiling',
    help: 'Calls allowed at the server at once (protect.max_in_flight; +Inf when unlimited)',
    registers: [this.registry],
    aggregator: 'sum',
    collect: () => {
      const s = this.protect()
      if (s !== null) this.protectCeiling.set(s.ceiling ?? Infinity)
    },
  })
  readonly protectInFlight: Gauge<'class'> = new Gauge({
    name: 'basegate_protect_in_flight',
    help: 'Calls at the server now, by class',
    labelNames: ['class'] as const,
    registers: [this.registry],
    aggregator: 'sum',
    collect: (): void => this.perClass(this.protectInFlight, (s) => s.in_flight),
  })
  readonly protectWaiting: Gauge<'class'> = new Gauge({
    name: 'basegate_protect_waiting',
    help: 'Calls waiting for a slot at the server now, by class',
    labelNames: ['class'] as const,
    registers: [this.registry],
    aggregator: 'sum',
    collect: (): void => this.perClass(this.protectWaiting, (s) => s.waiting),
  })
  readonly protectUnloaded = new Gauge({
    name: 'basegate_protect_unloaded_seconds',
    help: "The server's unloaded time to response headers (p10 of interval medians, 3 minutes)",
    registers: [this.registry],
    aggregator: 'max',
    collect: () => {
      const ms = this.protect()?.unloaded_ms ?? null
      if (ms !== null) this.protectUnloaded.set(ms / 1000)
    },
  })
  readonly protectRecent = new Gauge({
    name: 'basegate_protect_recent_seconds',
    help: "The server's recent time to response headers (median of the last interval)",
    registers: [this.registry],
    aggregator: 'max',
    collect: () => {
      const ms = this.protect()?.recent_ms ?? null
      if (ms !== null) this.protectRecent.set(ms / 1000)
    },
  })
  readonly sheds = counter(
    this.registry,
    'basegate_protect_shed_total',
    'Calls answered 503 because no slot at the server came within protect.queue_ms, by class',
    ['class'] as const
  )
  readonly delayed = counter(
    this.registry,
    'basegate_protect_delayed_total',
    'Calls that waited out rate_limits.delay_ms, by what the second check said',
    ['result'] as const
  )

  readonly monthlyUsed = gauge(
    this.registry,
    'basegate_monthly_used',
    'Calls charged to a team this month',
    ['team'] as const
  )
  readonly monthlyQuota = gauge(this.registry, 'basegate_monthly_quota', 'A team monthly quota', [
    'team',
  ] as const)

  readonly apiChangeCalls = counter(
    this.registry,
    'basegate_api_change_calls_total',
    'Calls that a server upgrade would break, by change-history entry (SPEC §8)',
    ['entry'] as const
  )
  readonly serverVersion = gauge(
    this.registry,
    'basegate_server_version_info',
    'The server version basegate applies the change history for (1 on the version in force)',
    ['version'] as const
  )

  readonly buildInfo = gauge(
    this.registry,
    'basegate_build_info',
    'basegate version and the Node.js it runs on (always 1)',
    ['version', 'node'] as const
  )
  readonly reloads = counter(
    this.registry,
    'basegate_config_reloads_total',
    'Configuration reloads by result (ok, refused)',
    ['result'] as const
  )
  readonly lastReloadOk = gauge(
    this.registry,
    'basegate_config_last_reload_successful',
    '1 when the last reload was applied (or none was tried), 0 when it was refused',
    [] as const,
    'min'
  )

  constructor(opts: { version?: string; processMetrics?: boolean } = {}) {
    // Process metrics (CPU, memory, event-loop lag, GC): basegate_process_*, nodejs_*.
    if (opts.processMetrics !== false) collectDefaultMetrics({ register: this.registry })
    this.buildInfo.labels(opts.version ?? 'unknown', process.version).set(1)
    this.lastReloadOk.set(1)
  }

  /** Where basegate_lease_calls_held is read from (the leasing store, when leases are on). */
  /** Where the held-body gauges are read from (the size room's budget). */
  watchHeldBodies(held: () => { memory: number; disk: number }): void {
    this.heldBodies = held
  }

  /** Where basegate_usage_bases_forgotten_total is read from (the in-memory usage store). */
  watchUsageForgotten(forgotten: () => number): void {
    this.usageForgotten = forgotten
  }

  /** Where basegate_store_up is read from. */
  watchStore(up: () => boolean): void {
    this.storeUp = up
  }

  /** Where basegate_upstream_up is read from. */
  watchUpstream(up: () => boolean): void {
    this.upstreamUp = up
  }

  /** Where basegate_store_memory_dropped_total is read from (the in-memory stores' drops). */
  watchMemoryDropped(dropped: () => number): void {
    this.memoryDropped = dropped
  }

  /** Where basegate_connections_open is read from (the proxy port's caps). */
  watchConnections(open: () => number): void {
    this.openConnections = open
  }

  /** Where the upstream share gauges are read from (the gateway's shares). */
  watchShares(state: () => { in_use: number; waiting: number; busy: number }): void {
    this.shares = state
  }

  watchLeases(held: () => number): void {
    this.leaseUnitsHeld = held
  }

  /** Where the protection gauges are read from (the gateway's protector). */
  watchProtect(state: () => ProtectState): void {
    this.protect = state
  }

  private perClass(g: Gauge<'class'>, of: (s: ProtectState) => Record<string, number>): void {
    const s = this.protect()
    if (s === null) return
    for (const [cls, n] of Object.entries(of(s))) g.labels(cls).set(n)
  }

  /** A reload's result. */
  countReload(ok: boolean): void {
    this.reloads.labels(ok ? 'ok' : 'refused').inc()
    this.lastReloadOk.set(ok ? 1 : 0)
  }

  countApiChange(entry: string): void {
    this.apiChangeCalls.labels(entry).inc()
  }

  /** The version in force is 1; the others are dropped. */
  setServerVersion(version: string | null): void {
    this.serverVersion.reset()
    this.serverVersion.labels(version ?? 'unknown').set(1)
  }

  /**
   * One request's outcome: basegate_requests_total, and basegate_refusals_total for a refusal.
   * A dry-run call forwarded counts as outcome `dry_run` (and refusal `dry_run`); one whose
   * upstream then failed keeps its `upstream_error`, and still counts the would-be refusal.
   */
  countRequest(cls: string, outcome: OutcomeKind, dryRun = false, status?: number): void {
    const label = dryRun && outcome === 'forwarded' ? 'dry_run' : outcome
    this.pendingRequests.add(cls, label)
    if (status !== undefined) this.pendingResponses.add(cls, status)
    const reason = dryRun ? 'dry_run' : REFUSAL_OF[outcome]
    if (reason === undefined) return
    this.pendingRefusals.set(reason, (this.pendingRefusals.get(reason) ?? 0) + 1)
  }

  /** This process's values, to be merged by a primary (workers). */
  snapshot(): Promise<MetricObjectWithValues<MetricValue<string>>[]> {
    return this.registry.getMetricsAsJSON()
  }

  /**
   * The exposition of this process merged with its workers' snapshots: counters and
   * histograms add up, gauges merge by their aggregator (prom-client's cluster merge).
   */
  async renderWith(
    others: readonly MetricObjectWithValues<MetricValue<string>>[][]
  ): Promise<string> {
    const merged = AggregatorRegistry.aggregate([await this.snapshot(), ...others])
    return merged.metrics()
  }

  /** Names of every metric (for the dashboard test). */
  names(): string[] {
    return this.registry.getMetricsAsArray().map((m) => m.name)
  }
}
