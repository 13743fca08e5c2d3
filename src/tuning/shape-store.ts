import { scriptBeside } from '../limiter/script.js'
import { fnv1a } from '../hash.js'
import { Cluster, type Redis } from 'ioredis'
import { keys } from '../limiter/keys.js'
import { checkAnswers, indexShards, slotGroups } from '../limiter/pipeline.js'
import { sendBatch } from '../limiter/batch-write.js'
import { daysBetween } from '../quota/month.js'
import type { BatchId } from '../types.js'
import { firstTime } from '../limiter/once.js'
import {
  addToHour,
  decodeHour,
  decodeLog,
  encodeFreshHour,
  encodeHour,
  KEEP_DAYS,
  type Hour,
  type ShapeDay,
} from './shape.js'

// SPEC §11: where the key-days' shapes live. In Redis, one hash per key, family and day (one
// script per write: shape-add.lua), and per day an index of the key-days written (16 shards),
// kept KEEP_DAYS days after their day. In memory (no store configured), the same, bounded.

/** What one process gathered for one key-day between writes (bins of the day: 5 s each). */
export interface SeriesDay {
  total: number
  refusedRate: number
  refusedMonthly: number
  /** Hour of the day → its 5-second bin → calls. */
  hours: Map<number, Map<number, number>>
}

/** One write: day → `<key>\t<family>` → what it gathered; with when the day ends. */
export type ShapeBatch = Map<string, { dayEndMs: number; series: Map<string, SeriesDay> }>

export interface ShapeStore {
  add(batch: ShapeBatch, id: BatchId): Promise<void>
  /** The key-days of a day (`<key>\t<family>`), at most `max` (more: `more` is true). */
  seriesOf(day: string, max: number): Promise<{ series: string[]; more: boolean }>
  /** Key-days of one key's families on one day, decoded (absent: not in the answer). */
  read(day: string, series: readonly string[]): Promise<Map<string, ShapeDay>>
}

const DAY_MS = 86_400_000
/**
 * The in-memory store's bound on key-days: about 350 bytes of heap each (a light one), so at
 * most ~35 MB; one instance without a store, 35 days of ~2,800 keys a day.
 */
export const MEMORY_SERIES_DAYS = 100_000

export const seriesId = (key: string, family: string): string => `${key}\t${family}`

export function splitSeries(id: string): { key: string; family: string } {
  const tab = id.indexOf('\t')
  return { key: id.slice(0, tab), family: id.slice(tab + 1) }
}

/** The index shard of a key-day: its key's first hex digit after a cheap hash. */
function shardOf(id: string): string {
  return ((fnv1a(id) >>> 0) % 16).toString(16)
}

/**
 * A key-day as the in-memory store keeps it: its hours encoded as Redis keeps them, one
 * latin1 string of (hour, length, encodeHour bytes) runs. A decoded hour is 720 counts (2.9 KB);
 * encoded, a light key-day is a few dozen bytes, so 200,000 of them stay in tens of MB.
 */
interface Kept {
  total: number
  refusedRate: number
  refusedMonthly: number
  hours: string
}

function packHours(hours: ReadonlyMap<number, Uint8Array>): string {
  const parts: Uint8Array[] = []
  for (const [hour, b] of hours) {
    // An hour's encoding is at most HOUR_CAP (2 KB) and a level: its length fits two bytes.
    parts.push(Buffer.from([hour, b.length >> 8, b.length & 255]), b)
  }
  // One flat string (not a rope of pieces): the smallest a V8 string of these bytes can be.
  return Buffer.concat(parts).toString('latin1')
}

/** The hours of a kept key-day, each still encoded. */
function unpackRaw(s: string): Map<number, Buffer> {
  const out = new Map<number, Buffer>()
  for (let at = 0; at < s.length;) {
    const hour = s.charCodeAt(at)
    const len = (s.charCodeAt(at + 1) << 8) | s.charCodeAt(at + 2)
    out.set(hour, Buffer.from(s.slice(at + 3, at + 3 + len), 'latin1'))
    at += 3 + len
  }
  return out
}

function unpackHours(s: string): Map<number, Hour> {
  const out = new Map<number, Hour>()
  for (const [hour, b] of unpackRaw(s)) out.set(hour, decodeHour(b))
  return out
}

export class MemoryShapeStore implements ShapeStore {
  /** `<day>\n<series>` → its shape; a Map keeps write order, so the first entry is the stalest. */
  private readonly days = new Map<string, Kept>()
  private readonly seen = new Map<string, number>()

  constructor(private readonly maxSeriesDays = MEMORY_SERIES_DAYS) {}

  /** Key-days held (the memory bound's test). */
  get size(): number {
    return this.days.size
  }

  async add(batch: ShapeBatch, id: BatchId): Promise<void> {
    if (!firstTime(this.seen, id)) return
    for (const [day, { series }] of batch) {
      for (const [sid, s] of series) {
        const k = `${day}\n${sid}`
        let kept = this.days.get(k)
        if (kept === undefined) {
          kept = { total: 0, refusedRate: 0, refusedMonthly: 0, hours: '' }
          if (this.days.size >= this.maxSeriesDays) this.forgetStalest()
        } else this.days.delete(k)
        this.days.set(k, kept)
        kept.total += s.total
        kept.refusedRate += s.refusedRate
        kept.refusedMonthly += s.refusedMonthly
        // Only the hours this batch touched are decoded; a new one (most, in a flood of one-off
        // keys) is encoded straight from its bins.
        const hours: Map<number, Uint8Array> = unpackRaw(kept.hours)
        for (const [hour, bins] of s.hours) {
          const was = hours.get(hour)
          hours.set(
            hour,
            was === undefined ? encodeFreshHour(bins) : encodeHour(addToHour(decodeHour(was), bins))
          )
        }
        kept.hours = packHours(hours)
      }
      for (const k of this.days.keys()) {
        if (daysBetween(k.slice(0, 10), day) > KEEP_DAYS) this.days.delete(k)
        else break
      }
    }
  }

  private forgetStalest(): void {
    const stalest = this.days.keys().next().value
    if (stalest !== undefined) this.days.delete(stalest)
  }

  async seriesOf(day: string, max: number): Promise<{ series: string[]; more: boolean }> {
    const out: string[] = []
    const prefix = `${day}\n`
    for (const k of this.days.keys()) {
      if (!k.startsWith(prefix)) continue
      if (out.length === max) return { series: out, more: true }
      out.push(k.slice(prefix.length))
    }
    return { series: out, more: false }
  }

  async read(day: string, series: readonly string[]): Promise<Map<string, ShapeDay>> {
    const out = new Map<string, ShapeDay>()
    for (const s of series) {
      const d = this.days.get(`${day}\n${s}`)
      if (d !== undefined) out.set(s, { ...d, hours: unpackHours(d.hours) })
    }
    return out
  }
}

/** Writes in script calls of at most PER_CALL key-days and about ARGS_PER_CALL arguments. */
function packed(ws: readonly ShapeWrite[]): ShapeWrite[][] {
  const out: ShapeWrite[][] = []
  let cur: ShapeWrite[] = []
  let args = 0
  for (const w of ws) {
    if (cur.length > 0 && (cur.length >= PER_CALL || args + w.args.length > ARGS_PER_CALL)) {
      out.push(cur)
      cur = []
      args = 0
    }
    cur.push(w)
    args += w.args.length
  }
  if (cur.length > 0) out.push(cur)
  return out
}

/** One key-day's write: its hash, its part of the script's arguments, its index entry. */
interface ShapeWrite {
  key: string
  args: (string | number)[]
  index: string
  sid: string
  expireAtMs: number
}

const SHAPE_ADD = scriptBeside(import.meta.url, 'shape-add', ['once'])
const SHAPE_READ = scriptBeside(import.meta.url, 'shape-read')
/** Key-days per read call. */
const PER_READ = 128
/** The read script (on a pipeline it queues, and its answer comes with exec). */
type ReadCommand = (numKeys: number, ...keys: string[]) => Promise<Buffer[][]>
/** Key-days written per pipeline. */
const CHUNK = 500
/** Key-days per script call (its arguments stay far under Lua's unpack and Redis's limits). */
const PER_CALL = 50
const ARGS_PER_CALL = 20_000

export class RedisShapeStore implements ShapeStore {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly prefix: string
  ) {
    client.defineCommand('basegateShapeAdd', { lua: SHAPE_ADD })
    client.defineCommand('basegateShapeRead', { lua: SHAPE_READ })
  }

  private key(sid: string, day: string): string {
    const { key, family } = splitSeries(sid)
    return this.prefix + keys.shape(key, day, family)
  }

  async add(batch: ShapeBatch, id: BatchId): Promise<void> {
    const writes: ShapeWrite[] = []
    for (const [day, { dayEndMs, series }] of batch) {
      const expireAtMs = dayEndMs + KEEP_DAYS * DAY_MS
      for (const [sid, s] of series) {
        const args: (string | number)[] = [
          expireAtMs,
          s.total,
          s.refusedRate,
          s.refusedMonthly,
          s.hours.size,
        ]
        for (const [hour, bins] of s.hours) {
          args.push(hour, bins.size)
          for (const [bin, n] of bins) args.push(bin, n)
        }
        writes.push({
          key: this.key(sid, day),
          args,
          index: this.prefix + keys.shapeIndex(day, shardOf(sid)),
          sid,
          expireAtMs,
        })
      }
    }
    for (let i = 0; i < writes.length; i += CHUNK) await this.write(writes.slice(i, i + CHUNK), id)
  }

  /**
   * One piece of a batch: its key-days in as few script calls as their slots allow (on one
   * Redis, PER_CALL at a time; on a Cluster, grouped by slot), and their index entries.
   */
  private async write(piece: ShapeWrite[], id: BatchId): Promise<void> {
    const shards = indexShards(piece, (w) => ({
      index: w.index,
      member: w.sid,
      expireAtMs: w.expireAtMs,
    }))
    const calls =
      this.client instanceof Cluster
        ? slotGroups(piece, (w) => w.key).flatMap((g) => packed(g.map((i) => piece[i]!)))
        : packed(piece)
    const scriptCalls = calls.map((ws) => {
      const argv: (string | number)[] = [id.instance, id.seq]
      for (const w of ws) for (const a of w.args) argv.push(a)
      return { keys: ws.map((w) => w.key), argv }
    })
    await sendBatch(this.client, 'basegateShapeAdd', scriptCalls, shards)
  }

  async seriesOf(day: string, max: number): Promise<{ series: string[]; more: boolean }> {
    const out: string[] = []
    for (let s = 0; s < 16; s++) {
      const key = this.prefix + keys.shapeIndex(day, s.toString(16))
      let cursor = '0'
      do {
        const [next, found] = await this.client.sscan(key, cursor, 'COUNT', 1000)
        cursor = next
        for (const f of found) {
          if (out.length === max) return { series: out, more: true }
          out.push(f)
        }
      } while (cursor !== '0')
    }
    return { series: out, more: false }
  }

  async read(day: string, series: readonly string[]): Promise<Map<string, ShapeDay>> {
    // A report reads many key-days of a day at once: PER_READ per script call, on one Redis in
    // one pipeline (one write), on a Cluster per slot.
    if (series.length === 0) return new Map()
    const ks = series.map((s) => this.key(s, day))
    const slots = this.client instanceof Cluster ? slotGroups(ks, (k) => k) : [ks.map((_, i) => i)]
    const groups: number[][] = []
    for (const g of slots)
      for (let j = 0; j < g.length; j += PER_READ) groups.push(g.slice(j, j + PER_READ))
    const read = (on: unknown, g: number[]) =>
      (on as Record<string, ReadCommand>)['basegateShapeReadBuffer']!(
        g.length,
        ...g.map((i) => ks[i]!)
      )
    let answers: Buffer[][][]
    if (this.client instanceof Cluster)
      answers = await Promise.all(groups.map((g) => read(this.client, g)))
    else {
      const p = this.client.pipeline()
      for (const g of groups) void read(p, g)
      const res = await p.exec()
      checkAnswers(res, groups.length)
      answers = res!.map(([, a]) => a as Buffer[][])
    }
    const out = new Map<string, ShapeDay>()
    groups.forEach((g, gi) =>
      g.forEach((i, n) => {
        const d = shapeDayOf(answers[gi]![n]!)
        if (d !== null) out.set(series[i]!, d)
      })
    )
    return out
  }
}

const digit = (b: number | undefined) => b !== undefined && b >= 48 && b <= 57

/**
 * A key-day's hash (HGETALL's field, value list) as a ShapeDay; null when it holds no total.
 * Fields by their bytes: `t`, `r`, `m`, `hHH` (an hour kept), `aHH` (calls not folded yet).
 */
function shapeDayOf(h: readonly Buffer[]): ShapeDay | null {
  let total: Buffer | undefined
  let refusedRate = 0
  let refusedMonthly = 0
  const hours = new Map<number, Hour>()
  let logs: [number, Buffer][] | null = null
  for (let i = 0; i + 1 < h.length; i += 2) {
    const f = h[i]!
    const v = h[i + 1]!
    if (f.length === 1) {
      if (f[0] === 0x74 /* t */) total = v
      else if (f[0] === 0x72 /* r */) refusedRate = Number(v.toString())
      else if (f[0] === 0x6d /* m */) refusedMonthly = Number(v.toString())
    } else if (f.length === 3 && digit(f[1]) && digit(f[2])) {
      const hour = (f[1]! - 48) * 10 + (f[2]! - 48)
      if (f[0] === 0x68 /* h */) hours.set(hour, decodeHour(v))
      else if (f[0] === 0x61 /* a */) (logs ??= []).push([hour, v])
    }
  }
  if (total === undefined) return null
  // What the script has not folded yet, folded as it would be (once every kept hour is read).
  for (const [hour, v] of logs ?? [])
    hours.set(hour, addToHour(hours.get(hour) ?? null, decodeLog(v)))
  return { total: Number(total.toString()), refusedRate, refusedMonthly, hours }
}
