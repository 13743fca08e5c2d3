// The types every module shares, in one place.

import type { Logger } from 'pino'

/** pino's logger (observe/log.ts makes it); typed here so any room can take one. */
export type { Logger }

export type Deployment = 'cloud' | 'dedicated' | 'self-hosted'

/** The five request classes of SPEC §3, in matching order. */
export type RequestClass = 'exempt' | 'auth_token' | 'base' | 'account' | 'other'

/** The classes that have a rate limit (every one but `exempt`). */
export type LimitedClass = Exclude<RequestClass, 'exempt'>

/** One limit: at most `limit` calls in any `windowMs`. */
export interface Rate {
  limit: number
  windowMs: number
  /** As written in the file, for logs and /v1/config. */
  text: string
}

/** A class or rule may carry several rates; an empty list means unlimited. */
export type RateList = readonly Rate[]

export interface RuleConfig {
  name: string
  /** Upper-case methods; null matches every method. */
  methods: readonly string[] | null
  path: string
  limits: RateList
  /** SPEC §2: a dry-run rule is counted and logged but never refuses. */
  mode: Mode
}

/** SPEC §10: own limits for particular bases, teams or clients, in place of the class's. */
export interface OverrideConfig {
  name: string
  /** Base UUIDs (32 hex, lower case). */
  bases: readonly string[]
  /** Team ids (every base of the team). */
  teams: readonly string[]
  /** Client CIDRs (or addresses). */
  clients: readonly string[]
  /** Per class: the rates in place of the class's (an empty list: unlimited). */
  limits: Readonly<Partial<Record<LimitedClass, RateList>>>
  /** Teams only: the team's bases share one window per class, keyed by the team. */
  shared: boolean
  /** dry-run: the class limit stays in force; the override is counted beside it and only logged. */
  mode: Mode
}

/** The classes that may wait for a slot of the in-flight ceiling (exempt calls never wait). */
export type QueuedClass = Exclude<RequestClass, 'exempt'>

/** SPEC §9: the in-flight ceiling, its queue and one key's share. */
export interface ProtectConfig {
  /** Calls of this instance at the server at once: a number, `auto`, or Infinity (unlimited). */
  maxInFlight: number | 'auto'
  /** The lowest ceiling `auto` goes to. */
  minInFlight: number
  /** How long a call waits for a slot before its 503. */
  queueMs: number
  /** Every queued class, the first served first. */
  priority: readonly QueuedClass[]
  /** Calls of one key at the server at once; Infinity = unlimited. */
  keyInFlight: number
}

export type HeadersMode = 'gateway' | 'all' | 'none'
/** SPEC §10: which rate headers: the service's x-ratelimit-*, the IETF draft's, or both. */
export type HeaderStyle = 'x-ratelimit' | 'ietf' | 'both'
export type Mode = 'enforce' | 'dry-run'
export type OnStoreError = 'open' | 'closed'

export interface SizeLimits {
  listRows: number
  appendRows: number
  updateRows: number
  deleteRows: number
  sqlList: number
  maxBodyBytes: number
  /** SPEC §4: bytes of checked bodies held in memory at once (all calls); past it, a temp file. */
  bufferBytes: number
  /** SPEC §4: bytes of checked bodies held in temporary files at once (all calls). */
  spillBytes: number
  /** SPEC §4: a checked body not received whole within this from its head → 408. */
  bodyTimeoutMs: number
  /** SPEC §4: the part of bufferBytes + spillBytes one client IP may hold (0 < share ≤ 1). */
  clientShare: number
  /** As the file wrote it (`1/8`), for /v1/config. */
  clientShareText: string
  /** SPEC §4: bytes per second a body must average since its first byte (judged from its 10th second); 0 = no floor. */
  minBodyRate: number
}

export interface PlanConfig {
  calls?: number
  callsPerUser?: number
}

export interface TeamConfig {
  id: string
  plan: string
  users: number
  bases: readonly string[]
}

export interface MonthlyConfig {
  enabled: boolean
  timezone: string
  plans: Readonly<Record<string, PlanConfig>>
  teams: readonly TeamConfig[]
}

/** Where counters live: this process, one Redis, or a Redis Cluster. */
export type StoreKind = 'memory' | 'redis' | 'cluster'

/** limits.yaml after expansion, validation and preset merging. */
export interface Config {
  deployment: Deployment
  /** Proxy processes sharing the listener (1 = this process serves alone); `auto` = cores. */
  workers: number | 'auto'
  listen: {
    host: string
    port: number
    /** A client must send its whole request head within this (slowloris). */
    headersTimeoutMs: number
    /** A client must send its whole request within this; 0 = no limit. */
    requestTimeoutMs: number
    /** SPEC §4: an idle keep-alive connection is closed after this. */
    keepaliveTimeoutMs: number
    /** SPEC §4: client connections at once (auto: from the process's open-file limit). */
    maxConnections: number | 'auto'
    /** SPEC §4: client connections from one client IP at once (trusted proxies: only the total). */
    maxConnectionsPerClient: number
    /** HTTPS on the proxy port: PEM files, re-read on SIGHUP (the paths need a restart). */
    tls: { certFile: string; keyFile: string } | null
  }
  admin: { host: string; port: number; token: string }
  /** maxConnections: the pool's cap on connections to the server (restart-only). */
  upstream: {
    url: string
    timeoutMs: number
    maxConnections: number
    /** SPEC §4: upstream connections one client IP holds at once. */
    maxConnectionsPerClient: number
    /** SPEC §4: an unchecked body announcing at most this is read whole before a connection is taken; 0 = never. */
    bufferRequestBytes: number
    /** SPEC §4: an answer's bytes held in memory while its client reads slowly (then a temporary file); 0 = streamed. */
    bufferResponseBytes: number
    /** SPEC §4: a tunnel with no byte either way for this long is closed. */
    tunnelIdleMs: number
    /** SPEC §4: WebSocket tunnels open at once (this process's, with workers its share). */
    maxTunnels: number
  }
  store: {
    url: string
    cluster: readonly string[]
    prefix: string
    timeoutMs: number
    onError: OnStoreError
    /** Issue #14: hot keys take shares of their window (limiter/leases.ts). */
    leases: boolean
    /** SPEC §4: windows the in-memory store keeps at most (the idlest dropped past it). */
    memoryKeys: number
  }
  clientIp: { trustedProxies: readonly string[]; ipv6Prefix: number }
  rateLimits: {
    account: RateList
    base: RateList
    authToken: RateList
    other: RateList
    rules: readonly RuleConfig[]
    ipCeiling: RateList
    /** SPEC §9: a call refused by a rate window that frees within this waits and is checked again; 0 = never. */
    delayMs: number
  }
  /** SPEC §10: own limits for particular bases, teams or clients (the first that names a key wins). */
  overrides: readonly OverrideConfig[]
  /** SPEC §9: protecting the server as a whole. */
  protect: ProtectConfig
  /** SPEC §9: `serverErrors: false` gives back calls the server answered 5xx (or 502/504). */
  charge: { serverErrors: boolean }
  headers: HeadersMode
  headerStyle: HeaderStyle
  mode: Mode
  exempt: readonly string[]
  /** SPEC §2: never limited, never charged, no x-ratelimit headers. */
  allow: { clients: readonly string[]; bases: readonly string[] }
  sizeLimits: SizeLimits
  /** SPEC §4 "Nothing a stranger sends outlives its window". */
  usage: { keepAfter: number }
  monthly: MonthlyConfig
  /** SPEC §8: the server's version, "X.Y" or "auto" (/server-info/). */
  server: { version: string }
  history: { removed: 'gone' | 'pass'; deprecationHeaders: boolean }
}

/** A config problem: the field's dotted path and what is wrong with it. */
export interface ConfigProblem {
  field: string
  message: string
}

// ---- limiter ----

/** "1/50 of the window" (SPEC §3) is the bucket width; every rate unit divides by 50. */
export const BUCKETS_PER_WINDOW = 50

/** Fields every window shares. */
interface ChargeBase {
  /** Store key without the configured prefix. */
  key: string
  limit: number
  /** The request's class (for the usage API and the labels). */
  cls: RequestClass
}

/** A sliding window of `windowMs` (SPEC §3), counted in BUCKETS_PER_WINDOW buckets. */
export interface SlidingCharge extends ChargeBase {
  kind: 'class' | 'ip_ceiling'
  windowMs: number
  /** SPEC §10: the override whose limit this class window is (its policy name in the headers). */
  override?: string
}

/** A rule's sliding window; a dry-run rule is checked but never refuses (SPEC §2). */
export interface RuleCharge extends ChargeBase {
  kind: 'rule'
  windowMs: number
  rule: string
  dryRun: boolean
}

/**
 * A team's calendar month (SPEC §5): its ledger (`key`), a count reset at `endMs`, charged
 * with the call's day so the month and its days are one write.
 */
export interface MonthlyCharge extends ChargeBase {
  kind: 'monthly'
  /** The end of the month (ms). */
  endMs: number
  /** The call's day of the month in monthly.timezone ("05"): the ledger's day it counts in. */
  day: string
  /** The month ("2026-11"). */
  month: string
  /** A store key whose `quota` field, when set, is the team's quota (a team changed by the admin API). */
  quotaKey: string
  team: string
}

/** One window to check and charge for a request. */
export type Charge = SlidingCharge | RuleCharge | MonthlyCharge

/** Which kind of window a charge belongs to, for headers and the usage API. */
export type ChargeKind = Charge['kind']

/** The window length of a charge; 0 for a calendar window. */
export function windowMsOf(c: Charge): number {
  return c.kind === 'monthly' ? 0 : c.windowMs
}

/** A window's state after a consume (or a peek). */
export interface WindowState {
  /** The limit applied (for a monthly window, the store's override when there is one). */
  limit: number
  /** Calls counted in the window, including this one when it was admitted. */
  used: number
  remaining: number
  /** When the oldest counted call leaves the window (ms); `nowMs` when nothing is counted. */
  resetAtMs: number
  /** For a window that refused: when a call would be admitted again (ms); else 0. */
  retryAtMs: number
  /**
   * The window was not read (a refusal answered from the over-limit cache by another window):
   * its numbers are placeholders, never shown as a state (SPEC §10 fields, the log's `used`).
   */
  unknown?: true
  /**
   * When the caller asked for leases: the calls this call charged to the window (1, or the
   * whole share of a lease granted). Absent when no lease could be asked (limiter/leases.ts).
   */
  charged?: number
}

export interface Decision {
  allowed: boolean
  /** One per charge, in the same order. */
  windows: WindowState[]
  /** The clock the decision's times are on (the store's, for Redis), for retry-after. */
  nowMs: number
  /**
   * Decided by this process's fallback limiter while the store did not answer (on_error open):
   * its monthly charge is not in the shared ledger yet (SPEC §5: charged when it answers).
   */
  local?: true
  /**
   * With `local`: the store's check was written and never answered, so it may have charged the
   * month there; its tag, with which the owed call is written only if it did not (SPEC §5).
   */
  inDoubt?: CheckTag
  /** Redis: when the script ran, on the store's clock (the request line's `store_time`). */
  storeMs?: number
  /** Admitted from a lease this process holds, without a store call. */
  leased?: boolean
}

/**
 * SPEC §5 "One ledger": a team's month as the store keeps it. `used` is always the sum of
 * `days` less the sum of `credited`: every write changes them together.
 */
export interface LedgerMonth {
  used: number
  /** Calls per day of the month ("05" → n). */
  days: Map<string, number>
  /** Calls credited per day of the month. */
  credited: Map<string, number>
  /** The quota in force at the month's last charged call (null: none charged it). */
  quota: number | null
  /** The month's credits, oldest first. */
  credits: CreditEntry[]
}

/** SPEC §5 "Credits are entries, not edits". */
export interface CreditEntry {
  /** When (ms). */
  atMs: number
  /** The calls taken off `used` (at most what it held: it never goes below 0). */
  calls: number
  /** The calls asked for. */
  asked: number
  note: string | null
  before: number
  after: number
}

/**
 * SPEC §5, exactly once: a charging check's tag, noted where the check charged a month (its
 * ledger's ring for `store`, keys.ts `ledgerRing`): the store connection's id and the check's
 * number on it.
 */
export interface CheckTag {
  store: string
  seq: number
}

/** Who wrote a batch of late counts (batch/recorder.ts): a process, and the batch's place in its order. */
export interface BatchId {
  instance: string
  seq: number
}

/** Where a team's month lives: its ledger, its credits and its notices. */
export interface LedgerRef {
  team: string
  /** "2026-11". */
  month: string
  /** The month's end (ms): the ledger is kept KEEP_DAYS past it. */
  endMs: number
}

/**
 * Calls to add to team ledgers, by ledger: those no rate-limit script counted (monthly quotas
 * off, or admitted while the store did not answer), written late in batches.
 */
export type LedgerBatch = Map<
  string,
  {
    ref: LedgerRef
    days: Map<string, number>
    /** Calls owed whose check may have charged them already: day → the checks' tags. */
    doubts?: Map<string, CheckTag[]>
  }
>

/** What the classifier makes of one request. */
export interface Classification {
  cls: RequestClass
  /** `base:<uuid32>` or `ip:<address or prefix>`. */
  key: string
  charges: Charge[]
  /** Whether x-ratelimit-* go on this answer (SPEC §2 `headers`). */
  emitHeaders: boolean
  /** The team of the call's base (any team of the file, monthly quotas on or not), if any. */
  team: string | undefined
}

export interface ConsumeOptions {
  /**
   * The leases to take, by window key (limiter/leases.ts): the calls to charge now, this one
   * and the share the caller will admit by itself; a window not named asks for none. Stores
   * that grant no leases ignore it.
   */
  asks?: ReadonlyMap<string, number>
}

/** Calls to give back to one window: `units` charged in the bucket of `atMs` (on the decision's clock). */
export interface GiveBack {
  charge: Charge
  units: number
  atMs: number
}

/**
 * The rate windows: what a call is checked against. Over the limit is a return value; only a
 * store failure rejects (a StoreError). The guard (limiter/guarded-store.ts) and the leases
 * (limiter/leases.ts) wrap this seam and no other: they exist for the windows alone.
 */
export interface Windows {
  /**
   * Checks every window and charges all of them, or none when one refuses. A decision this
   * process makes without I/O (a window its over-limit cache knows is full, a lease share, a
   * local store) comes back as is, not in a promise (issue #26: a flood's refusals take no
   * promise and no event-loop turn). A failure is always a rejection, never a throw.
   */
  consume(
    charges: readonly Charge[],
    nowMs: number,
    opts?: ConsumeOptions
  ): Decision | Promise<Decision>
  /** The windows' state now, changing nothing (`allowed`: whether a call would be admitted). */
  peek(charges: readonly Charge[], nowMs: number): Promise<Decision>
  /**
   * Takes back calls charged earlier, each from the bucket it was charged in, all in one call
   * where the store can; never below zero, never into a bucket that left the window.
   */
  giveBack(uses: readonly GiveBack[]): Promise<void>
  /** Whether the store answers now. */
  ready(): Promise<boolean>
  close(): Promise<void>
}

/**
 * SPEC §5: the team-month ledger, a seam of its own. It is the shared store's alone (no wrapper
 * forwards it, no fallback answers for it): a store that is down refuses a credit or a read, and
 * late batches retry (usage/ledger-recorder.ts).
 */
export interface Ledger {
  /**
   * SPEC §5 credit: lowers a month's `used` by up to `calls` (never below zero) and keeps the
   * entry; re-arms the month's notices the credit takes `used` back under (`quota`).
   */
  credit(
    ref: LedgerRef,
    c: { calls: number; note: string | null; atMs: number; day: string; quota: number }
  ): Promise<CreditEntry>
  /** SPEC §5: a team's month as the store keeps it. */
  readLedger(ref: LedgerRef): Promise<LedgerMonth>
  /** Adds calls to team ledgers, once per batch id (batch/recorder.ts). */
  addToLedger(batch: LedgerBatch, id: BatchId): Promise<void>
  /**
   * SPEC §5 notices: true for the claimant of (team, month, threshold), across every instance
   * sharing the store: the first to ask, or one asking again with the token it asked with (a
   * claim that timed out but landed is still its own); false for every other.
   */
  claimNotice(ref: LedgerRef, threshold: 80 | 100, token: string): Promise<boolean>
}

/** A store that keeps both (limiter/redis-store.ts, limiter/memory-store.ts). */
export interface LimiterStore extends Windows, Ledger {}
