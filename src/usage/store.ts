import { scriptBeside } from '../limiter/script.js'
import { Cluster, type Redis } from 'ioredis'
import { keys } from '../limiter/keys.js'
import { indexShards } from '../limiter/pipeline.js'
import { sendBatch } from '../limiter/batch-write.js'
import { addDays, daysBetween } from '../quota/month.js'
import type { BatchId } from '../types.js'
import { firstTime } from '../limiter/once.js'
import { isOthers } from './keep.js'

// SPEC §5 "usage over time" for bases: admitted calls per day and base, kept 400 days and
// shared by every instance (they add up); a team's days are its ledger's (limiter/, SPEC §5
// "One ledger"). In Redis one hash per base and month, a field per day: a base costs at most
// 14 small hashes whatever its traffic, and a set per month names the bases that had calls
// (the export's list). Every write is once per batch id (batch/recorder.ts).

/** How long a day's count is kept: 400 days after its month ended (SPEC §5). */
export const KEEP_DAYS = 400
const DAY_MS = 86_400_000
/** Bases written per pipeline. */
const CHUNK = 1000
/** Bases read per page (the export's). */
const PAGE = 1000
/** The in-memory store keeps at most this many bases (the Redis path's per-interval bound). */
export const MEMORY_BASES = 50_000

/**
 * One flush: per day (YYYY-MM-DD), the calls per subject, and when its month ends. A subject is
 * a base (its 32-hex UUID) or a class's `others` (`others:base`: the calls of bases not kept by
 * name, SPEC §4), which the index of bases never lists.
 */
export type UsageBatch = Map<string, { monthEndMs: number; counts: Map<string, number> }>

export interface UsageStore {
  /** Adds the batch's counts, once per batch id: a second write of the same id changes nothing. */
  add(batch: UsageBatch, id: BatchId): Promise<void>
  /**
   * Calls per day of one subject (a base's UUID, or `others:<class>`) over [from, to]
   * (YYYY-MM-DD): days without calls are absent.
   */
  read(subject: string, from: string, to: string): Promise<Map<string, number>>
  /**
   * The bases with calls in a month ("2026-11"), a page at a time (the export streams them:
   * however many a month holds, a page is what is held).
   */
  bases(month: string): AsyncIterable<string[]>
}

/** The months (YYYY-MM) that [from, to] touches, in order. */
export function monthsOf(from: string, to: string): string[] {
  const out: string[] = []
  for (let m = from.slice(0, 7); m <= to.slice(0, 7);) {
    out.push(m)
    const [y, mo] = m.split('-').map(Number) as [number, number]
    m = mo === 12 ? `${y + 1}-01` : `${y}-${String(mo + 1).padStart(2, '0')}`
  }
  return out
}

/**
 * In this process (the in-memory deployment): the same counts, forgotten on restart, and
 * bounded (issue #40 item 5): at most MEMORY_BASES bases, the one written longest ago forgotten
 * first, and no day past KEEP_DAYS.
 */
export class MemoryUsageStore implements UsageStore {
  /** Base → day → calls; a Map keeps write order, so the first entry is the stalest base. */
  private readonly days = new Map<string, Map<string, number>>()
  private readonly seen = new Map<string, number>()
  /** Bases forgotten to stay within the bound (basegate_usage_bases_forgotten_total). */
  forgotten = 0

  constructor(private readonly maxBases = MEMORY_BASES) {}

  async add(batch: UsageBatch, id: BatchId): Promise<void> {
    if (!firstTime(this.seen, id)) return
    for (const [day, { counts }] of batch) {
      for (const [uuid, n] of counts) {
        let byDay = this.days.get(uuid)
        if (byDay === undefined) {
          byDay = new Map()
          if (this.days.size >= this.maxBases) this.forgetStalest()
        } else this.days.delete(uuid)
        this.days.set(uuid, byDay)
        byDay.set(day, (byDay.get(day) ?? 0) + n)
        for (const d of byDay.keys()) if (daysBetween(d, day) > KEEP_DAYS + 31) byDay.delete(d)
      }
    }
  }

  private forgetStalest(): void {
    const stalest = this.days.keys().next().value
    if (stalest === undefined) return
    this.days.delete(stalest)
    this.forgotten++
  }

  /** Bases held now (the bound's test). */
  get size(): number {
    return this.days.size
  }

  async read(uuid: string, from: string, to: string): Promise<Map<string, number>> {
    const out = new Map<string, number>()
    for (const [d, n] of this.days.get(uuid) ?? []) if (d >= from && d <= to) out.set(d, n)
    return out
  }

  async *bases(month: string): AsyncIterable<string[]> {
    let page: string[] = []
    for (const [uuid, byDay] of this.days) {
      if (isOthers(uuid) || ![...byDay.keys()].some((d) => d.startsWith(month))) continue
      page.push(uuid)
      if (page.length === PAGE) {
        yield page
        page = []
      }
    }
    if (page.length > 0) yield page
  }
}

const USAGE_ADD = scriptBeside(import.meta.url, 'usage-add', ['once'])

/** One base's month, as one script call writes it. */
interface Write {
  key: string
  uuid: string
  month: string
  expireAtMs: number
  fields: (string | number)[]
}

/** In Redis or a Cluster: a base's month is one hash in one slot (its hash tag). */
export class RedisUsageStore implements UsageStore {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly prefix: string
  ) {
    client.defineCommand('basegateUsageAdd', { lua: USAGE_ADD })
  }

  /** A base's month (`{u:b:<uuid>}`), or a class's others (`{u:o:<class>}`): one hash each. */
  private key(subject: string, month: string): string {
    return (
      this.prefix +
      keys.usageDays(isOthers(subject) ? `o:${subject.slice(7)}` : `b:${subject}`, month)
    )
  }

  /** Pipelines of CHUNK bases (per key on a Cluster, whose pipelines keep to one slot). */
  async add(batch: UsageBatch, id: BatchId): Promise<void> {
    const writes = new Map<string, Write>()
    for (const [day, { monthEndMs, counts }] of batch) {
      const month = day.slice(0, 7)
      for (const [uuid, n] of counts) {
        const key = this.key(uuid, month)
        let w = writes.get(key)
        if (w === undefined) {
          const expireAtMs = monthEndMs + KEEP_DAYS * DAY_MS
          writes.set(key, (w = { key, uuid, month, expireAtMs, fields: [] }))
        }
        w.fields.push(day.slice(8), n)
      }
    }
    const all = [...writes.values()]
    // In pieces, one after another: a flood of one-off bases makes one interval's write large,
    // and its command objects stay few at a time.
    for (let i = 0; i < all.length; i += CHUNK) await this.write(all.slice(i, i + CHUNK), id)
  }

  /**
   * One piece: each base's month once per batch id, and the month's index of bases (a set, so
   * adding a base again changes nothing), one SADD per index shard.
   */
  private async write(piece: Write[], id: BatchId): Promise<void> {
    const shards = indexShards(bases(piece), (w) => ({
      index: this.prefix + keys.usageIndex(w.month, w.uuid),
      member: w.uuid,
      expireAtMs: w.expireAtMs,
    }))
    const calls = piece.map((w) => ({
      keys: [w.key],
      argv: [id.instance, id.seq, w.expireAtMs, ...w.fields],
    }))
    await sendBatch(this.client, 'basegateUsageAdd', calls, shards)
  }

  async read(uuid: string, from: string, to: string): Promise<Map<string, number>> {
    const months = monthsOf(from, to)
    const hashes = await Promise.all(months.map((m) => this.client.hgetall(this.key(uuid, m))))
    const out = new Map<string, number>()
    months.forEach((m, i) => {
      for (const [dd, n] of Object.entries(hashes[i]!)) {
        if (dd.length !== 2) continue // s:<process> fields (batch/recorder.ts)
        const day = `${m}-${dd}`
        if (day >= from && day <= to) out.set(day, Number(n))
      }
    })
    return out
  }

  async *bases(month: string): AsyncIterable<string[]> {
    for (const key of keys.usageIndexes(month)) {
      let cursor = '0'
      do {
        const [next, found] = await this.client.sscan(this.prefix + key, cursor, 'COUNT', PAGE)
        cursor = next
        if (found.length > 0) yield found
      } while (cursor !== '0')
    }
  }
}

/** The writes of bases (a class's `others` is in no index). */
function bases(piece: readonly Write[]): Write[] {
  return piece.filter((w) => !isOthers(w.uuid))
}

/** Every day of [from, to] with its calls (0 where none), oldest first. */
export function dayRows(counts: Map<string, number>, from: string, to: string) {
  const out: { date: string; calls: number }[] = []
  const n = daysBetween(from, to)
  for (let i = 0; i <= n; i++) {
    const date = addDays(from, i)
    out.push({ date, calls: counts.get(date) ?? 0 })
  }
  return out
}
