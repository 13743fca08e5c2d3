import { scriptBeside } from '../limiter/script.js'
import { fnv1a } from '../hash.js'
import type { Cluster, Redis } from 'ioredis'
import { BatchedFront, type RecorderOptions } from '../batch/recorder.js'
import { sendBatch } from '../limiter/batch-write.js'
import { keys } from '../limiter/keys.js'
import type { BatchId } from '../types.js'
import { firstTime } from '../limiter/once.js'

// SPEC §8 upgrade report: per history entry, calls over the last 35 days, when last seen, and
// the busiest keys, shared by every instance, in bounded memory. Counts live in day buckets:
// per entry and UTC day, a total and the day's busiest keys (at most KEYS_PER_DAY, the rest
// trimmed), kept 36 days. Memory per entry is bounded by 36 × KEYS_PER_DAY, whatever the
// traffic: no entry per call.

export const REPORT_DAYS = 35
export const TOP_KEYS = 20
/** Keys kept per entry and day: the top 20 of 35 days is read from these. */
export const KEYS_PER_DAY = 100
const DAY_MS = 86_400_000

/** One instance's counts since its last flush. */
export type ReportBatch = Map<
  string,
  { calls: number; lastSeenMs: number; keys: Map<string, number> }
>

export interface EntryUsage {
  calls: number
  lastSeenMs: number | null
  topKeys: { key: string; calls: number }[]
}

export interface ReportStore {
  /** Adds a batch (each entry on the day of its last call), once per batch id. */
  add(batch: ReportBatch, id: BatchId): Promise<void>
  read(entryIds: readonly string[], nowMs: number): Promise<Map<string, EntryUsage>>
}

const dayOf = (ms: number) => Math.floor(ms / DAY_MS)

function top(map: Map<string, number>, n: number): { key: string; calls: number }[] {
  return [...map]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, n)
    .map(([key, calls]) => ({ key, calls }))
}

/** In this process (the in-memory deployment). */
export class MemoryReportStore implements ReportStore {
  private readonly days = new Map<
    string,
    Map<number, { calls: number; keys: Map<string, number> }>
  >()
  private readonly last = new Map<string, number>()
  private readonly seen = new Map<string, number>()

  async add(batch: ReportBatch, batchId: BatchId): Promise<void> {
    if (!firstTime(this.seen, batchId)) return
    for (const [id, b] of batch) {
      const today = dayOf(b.lastSeenMs)
      let days = this.days.get(id)
      if (!days) this.days.set(id, (days = new Map()))
      for (const d of days.keys()) if (d <= today - REPORT_DAYS) days.delete(d)
      let day = days.get(today)
      if (!day) days.set(today, (day = { calls: 0, keys: new Map() }))
      day.calls += b.calls
      for (const [k, n] of b.keys) day.keys.set(k, (day.keys.get(k) ?? 0) + n)
      if (day.keys.size > KEYS_PER_DAY)
        day.keys = new Map(top(day.keys, KEYS_PER_DAY).map((t) => [t.key, t.calls]))
      this.last.set(id, Math.max(this.last.get(id) ?? 0, b.lastSeenMs))
    }
  }

  async read(entryIds: readonly string[], nowMs: number): Promise<Map<string, EntryUsage>> {
    const today = dayOf(nowMs)
    const out = new Map<string, EntryUsage>()
    for (const id of entryIds) {
      let calls = 0
      const keys = new Map<string, number>()
      for (const [d, day] of this.days.get(id) ?? []) {
        if (d <= today - REPORT_DAYS) continue
        calls += day.calls
        for (const [k, n] of day.keys) keys.set(k, (keys.get(k) ?? 0) + n)
      }
      out.set(id, {
        calls,
        lastSeenMs: calls > 0 ? (this.last.get(id) ?? null) : null,
        topKeys: top(keys, TOP_KEYS),
      })
    }
    return out
  }
}

/**
 * In Redis (or Cluster): every key of one entry carries the hash tag `{h:<entry>}`, so one
 * entry's flush and read run on one node. A flush is one pipeline per entry.
 */
const REPORT_ADD = scriptBeside(import.meta.url, 'report-add', ['once'])

export class RedisReportStore implements ReportStore {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly prefix: string
  ) {
    client.defineCommand('basegateReportAdd', { lua: REPORT_ADD })
  }

  private k(id: string, what: `count:${number}` | `keys:${number}` | 'last'): string {
    return this.prefix + keys.report(id, what)
  }

  /** One script call per entry (its keys share a slot), each applied once per batch id. */
  async add(batch: ReportBatch, batchId: BatchId): Promise<void> {
    const ttlMs = (REPORT_DAYS + 1) * DAY_MS
    const calls = [...batch].map(([id, b]) => {
      const day = dayOf(b.lastSeenMs)
      const argv: (string | number)[] = [batchId.instance, batchId.seq, b.calls, b.lastSeenMs]
      argv.push(ttlMs, KEYS_PER_DAY)
      for (const [key, n] of b.keys) argv.push(key, n)
      const ks = [this.k(id, `count:${day}`), this.k(id, `keys:${day}`), this.k(id, 'last')]
      return { keys: ks, argv }
    })
    await sendBatch(this.client, 'basegateReportAdd', calls)
  }

  async read(entryIds: readonly string[], nowMs: number): Promise<Map<string, EntryUsage>> {
    const today = dayOf(nowMs)
    const days = Array.from({ length: REPORT_DAYS }, (_, i) => today - i)
    const out = new Map<string, EntryUsage>()
    await Promise.all(
      entryIds.map(async (id) => {
        const p = this.client.pipeline()
        for (const d of days) p.hget(this.k(id, `count:${d}`), 'n')
        p.zunion(days.length, ...days.map((d) => this.k(id, `keys:${d}`)), 'WITHSCORES')
        p.zscore(this.k(id, 'last'), 'last')
        const res = (await p.exec()) ?? []
        const err = res.find(([e]) => e)
        if (err) throw err[0]
        let calls = 0
        for (let i = 0; i < days.length; i++) calls += Number(res[i]![1] ?? 0)
        const flat = (res[days.length]![1] as string[]) ?? []
        const keys = new Map<string, number>()
        for (let i = 0; i < flat.length; i += 2) keys.set(flat[i]!, Number(flat[i + 1]))
        const last = res[days.length + 1]![1] as string | null
        out.set(id, {
          calls,
          lastSeenMs: calls > 0 && last !== null ? Number(last) : null,
          topKeys: top(keys, TOP_KEYS),
        })
      })
    )
    return out
  }
}

/** The most distinct keys one entry's batch keeps between flushes (more only add to the total). */
const BATCH_KEYS = 1000
/** How many recent (entry, key) pairs are remembered to tell a returning client from a one-off. */
const RECENT_PAIRS = 65_536

/**
 * The (entry, key) pairs seen lately, as 32-bit hashes in a ring (bounded memory: 65,536
 * pairs, about 20 s of a flood of 3,500 fresh keys a second). A key seen again while its last
 * sighting is still in the ring is a returning client.
 */
class RecentPairs {
  private readonly ring = new Int32Array(RECENT_PAIRS)
  private readonly counts = new Map<number, number>()
  private at = 0
  private filled = false

  /** Remembers the pair; true when it was seen within the ring's span. */
  seenAgain(entryId: string, key: string): boolean {
    const h = pairHash(entryId, key)
    const again = this.counts.has(h)
    if (this.filled) {
      const old = this.ring[this.at]!
      const n = this.counts.get(old)!
      if (n <= 1) this.counts.delete(old)
      else this.counts.set(old, n - 1)
    }
    this.ring[this.at] = h
    this.counts.set(h, (this.counts.get(h) ?? 0) + 1)
    if (++this.at === RECENT_PAIRS) {
      this.at = 0
      this.filled = true
    }
    return again
  }
}

/** The pair's hash; a separator between them, so ("ab","c") and ("a","bc") differ. */
function pairHash(a: string, b: string): number {
  return fnv1a(b, fnv1a(a) ^ 0x7c)
}

/**
 * A bounded heavy-hitters count per entry (SPEC §8): every call counts in the exact total; a
 * batch keeps at most BATCH_KEYS keys. Past that, a returning client (seen again lately) takes
 * the place of the key with the fewest calls, a one-off is left out: a flood of fresh keys
 * (an attacker's, or a crawler's) can no longer push a client that calls steadily out of the
 * report, and no key is ever counted more calls than it made.
 */
function countKey(keys: Map<string, number>, key: string, returning: () => boolean): void {
  const n = keys.get(key)
  if (n !== undefined) return void keys.set(key, n + 1)
  if (keys.size < BATCH_KEYS) {
    returning() // remembered for later batches
    return void keys.set(key, 1)
  }
  if (!returning()) return
  let weakest: string | undefined
  let fewest = Infinity
  for (const [k, c] of keys) {
    if (c < fewest) {
      fewest = c
      weakest = k
    }
  }
  if (weakest !== undefined && fewest <= 1) keys.delete(weakest)
  else if (weakest !== undefined) return // every kept key called more than once: keep them
  keys.set(key, 1)
}

/** A batch as the recorder gathers it, with its calls (what a stop could not write). */
interface Open {
  batch: ReportBatch
  calls: number
}

/**
 * Counts on the request path in memory and writes them in batches (batch/recorder.ts): no
 * store round trip per call (SPEC §8 asks for none beyond the one rate-limit script), no call
 * counted twice, none lost while the store is away (written when it answers). Why batches
 * rather than a fold into the rate script: the calls the report counts are a small share, their
 * keys would need a slot of their own in Redis Cluster (one more cross-slot step per call), and
 * a report a few seconds late loses nothing an operator needs.
 */
export class UpgradeRecorder extends BatchedFront<Open> {
  private readonly recent = new RecentPairs()

  constructor(store: ReportStore, opts: RecorderOptions) {
    super(
      {
        empty: () => ({ batch: new Map(), calls: 0 }),
        isEmpty: (o) => o.batch.size === 0,
        weight: (o) => o.calls,
        write: (o, id) => store.add(o.batch, id),
      },
      opts
    )
  }

  record(entryId: string, key: string, nowMs: number): void {
    const open = this.recorder.batch
    let b = open.batch.get(entryId)
    if (!b) open.batch.set(entryId, (b = { calls: 0, lastSeenMs: 0, keys: new Map() }))
    b.calls++
    open.calls++
    if (nowMs > b.lastSeenMs) b.lastSeenMs = nowMs
    countKey(b.keys, key, () => this.recent.seenAgain(entryId, key))
  }

  override start(everyMs = 2000): void {
    super.start(everyMs)
  }
}
