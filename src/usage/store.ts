import { Cluster, type Redis } from 'ioredis'
import { keys } from '../limiter/keys.js'
import { addDays, daysBetween } from '../quota/month.js'

// SPEC §5 "usage over time": admitted calls per day, per team and per base, kept 400 days and
// shared by every instance (they add up). In Redis one hash per subject and month, a field per
// day of the month: a base or team costs at most 14 small hashes whatever its traffic.

/** How long a day's count is kept: 400 days after its month ended (SPEC §5). */
export const KEEP_DAYS = 400
const DAY_MS = 86_400_000
/** Subjects written per pipeline. */
const CHUNK = 1000

/** One flush: per day (YYYY-MM-DD), the calls per subject (`b:<uuid32>` or `t:<team>`). */
export type UsageBatch = Map<string, { monthEndMs: number; counts: Map<string, number> }>

export interface UsageStore {
  /**
   * Adds the batch's counts. Counts written are taken out of the batch as they go, so that when
   * the write fails part way, what is left in it is what was not written (the recorder keeps
   * that for the next write; nothing is counted twice).
   */
  add(batch: UsageBatch): Promise<void>
  /** Calls per day of one subject over [from, to] (YYYY-MM-DD): days without calls are absent. */
  read(subject: string, from: string, to: string): Promise<Map<string, number>>
  /**
   * SPEC §5 notices: true for the first caller, across every instance sharing the store, to
   * claim (team, month, threshold); false for every later one.
   */
  claimNotice(team: string, month: string, threshold: number, expireAtMs: number): Promise<boolean>
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

interface Write {
  counts: Map<string, number>
  subject: string
  key: string
  field: string
  n: number
  expireAtMs: number
}

/** In this process (the in-memory deployment): the same counts, forgotten on restart. */
export class MemoryUsageStore implements UsageStore {
  private readonly days = new Map<string, Map<string, number>>()
  private readonly notices = new Set<string>()

  async add(batch: UsageBatch): Promise<void> {
    for (const [day, { counts }] of batch) {
      for (const [subject, n] of counts) {
        let byDay = this.days.get(subject)
        if (byDay === undefined) this.days.set(subject, (byDay = new Map()))
        byDay.set(day, (byDay.get(day) ?? 0) + n)
        // Days past the 400 go as the subject is written again.
        for (const d of byDay.keys()) if (daysBetween(d, day) > KEEP_DAYS + 31) byDay.delete(d)
      }
    }
  }

  async read(subject: string, from: string, to: string): Promise<Map<string, number>> {
    const out = new Map<string, number>()
    for (const [d, n] of this.days.get(subject) ?? []) if (d >= from && d <= to) out.set(d, n)
    return out
  }

  async claimNotice(team: string, month: string, threshold: number): Promise<boolean> {
    const k = `${team}\n${month}\n${threshold}`
    if (this.notices.has(k)) return false
    this.notices.add(k)
    return true
  }
}

/** In Redis or a Cluster: a subject's month is one hash in one slot (its hash tag). */
export class RedisUsageStore implements UsageStore {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly prefix: string
  ) {}

  private key(subject: string, month: string): string {
    return this.prefix + keys.usageDays(subject, month)
  }

  /** Pipelines of CHUNK subjects (per key on a Cluster, whose pipelines keep to one slot). */
  async add(batch: UsageBatch): Promise<void> {
    const writes: Write[] = []
    for (const [day, { monthEndMs, counts }] of batch) {
      const expireAtMs = monthEndMs + KEEP_DAYS * DAY_MS
      for (const [subject, n] of counts)
        writes.push({
          counts,
          subject,
          key: this.key(subject, day.slice(0, 7)),
          field: day.slice(8),
          n,
          expireAtMs,
        })
    }
    // In pieces, one after another: a flood of one-off bases makes one interval's write large,
    // and its command objects stay few at a time.
    for (let i = 0; i < writes.length; i += CHUNK) {
      const piece = writes.slice(i, i + CHUNK)
      if (this.client instanceof Cluster) {
        const cluster = this.client
        const settled = await Promise.allSettled(
          piece.map((w) =>
            cluster.multi().hincrby(w.key, w.field, w.n).pexpireat(w.key, w.expireAtMs).exec()
          )
        )
        settled.forEach((r, k) => {
          if (r.status === 'fulfilled') piece[k]!.counts.delete(piece[k]!.subject)
        })
        const failed = settled.find((r) => r.status === 'rejected')
        if (failed) throw failed.reason
        continue
      }
      const p = this.client.pipeline()
      for (const w of piece) p.hincrby(w.key, w.field, w.n).pexpireat(w.key, w.expireAtMs)
      const results = (await p.exec()) ?? []
      // A count whose HINCRBY answered is written, whatever became of the others.
      piece.forEach((w, k) => {
        if (results[2 * k]?.[0] === null) w.counts.delete(w.subject)
      })
      const failed = results.find(([err]) => err !== null)
      if (failed) throw failed[0]
      if (results.length < 2 * piece.length) throw new Error('the usage pipeline was cut short')
    }
  }

  async read(subject: string, from: string, to: string): Promise<Map<string, number>> {
    const months = monthsOf(from, to)
    const hashes = await Promise.all(months.map((m) => this.client.hgetall(this.key(subject, m))))
    const out = new Map<string, number>()
    months.forEach((m, i) => {
      for (const [dd, n] of Object.entries(hashes[i]!)) {
        const day = `${m}-${dd}`
        if (day >= from && day <= to) out.set(day, Number(n))
      }
    })
    return out
  }

  async claimNotice(
    team: string,
    month: string,
    threshold: number,
    expireAtMs: number
  ): Promise<boolean> {
    const key = this.prefix + keys.notice(team, month, threshold)
    const won = await this.client.set(key, '1', 'PXAT', expireAtMs, 'NX')
    return won === 'OK'
  }
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
