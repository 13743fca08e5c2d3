import type { Snapshot } from '../http/snapshot.js'
import { dayBounds } from '../quota/month.js'
import type { Charge, RateList } from '../types.js'
import { refusals, timelineOf, type Bounds, type Timeline, type Window } from './estimate.js'
import { callOfFamily, CEILING } from './family.js'
import type { ShapeDay } from './shape.js'
import { seriesId, splitSeries, type ShapeStore } from './shape-store.js'
import { isOthers } from '../usage/keep.js'
import { shownKey } from '../request/base-uuid.js'

// SPEC §11 "what it answers": a candidate file judged on the calls the store kept. Per key, its
// families' shapes are summed into one timeline per window that counts them (a class, a rule,
// ip_ceiling), under the running snapshot and the candidate's; each is estimated (estimate.ts)
// and the keys are added up per window. Windows are judged one at a time (a call another window
// refused is counted as seen by this one), and a rule's `method`/`path` is matched against the
// families (a path segment that names one record is kept as `<id>`, matched as `0`).
// Reads one key at a time: memory holds one key's days, the sums, and the movers.

/** Key-days one report reads at most; past it the report says it is partial. */
export const MAX_SERIES_READ = 500_000
/** Keys named per window among those gaining or losing most. */
const MOVERS = 5

export interface Interval {
  lo: number
  hi: number
}

export interface KeyMove {
  key: string
  team: string | null
  calls: number
  running: Interval
  candidate: Interval
}

export interface SectionReport {
  /** `class:base`, `rule:<name>`, `ip_ceiling`. */
  id: string
  running: string
  candidate: string
  keys: number
  calls: number
  /**
   * Refused at the time, as recorded: by every limit then in force (the month's quota and
   * other windows included), so it may differ from the running limits replayed on the calls.
   */
  refused_recorded: number
  running_refused: Interval
  candidate_refused: Interval
  /** Keys the candidate refuses most more than the running limits, and most less. */
  more_refused: KeyMove[]
  fewer_refused: KeyMove[]
  /** Every key's figures (asked for with `detail`). */
  key_detail?: KeyMove[]
}

export interface TeamMonth {
  month: string
  calls: number
  running_runs_out: string | null
  candidate_runs_out: string | null
  /**
   * Set when the month's days before the range could not be read from the ledger (issue #48):
   * the run-out days then count from the range's first day only, and may be late.
   */
  ledger_unread: string | null
}

export interface TeamReport {
  team: string
  running_quota: number | null
  candidate_quota: number | null
  months: TeamMonth[]
}

export interface Suggestion {
  id: string
  limit: string
  /** The most calls one minute can hold under the limit in force (null: unlimited). */
  per_minute: number | null
  keys: number
  /** The keys' busiest minute over the range (aligned minutes). */
  busiest_minute: { p50: number; p90: number; p99: number; max: number }
  /** The lowest N/min that no key's busiest minute passed on 99 % of its days (SPEC §11). */
  suggested: string
  /**
   * What to set, with room to grow (issue #49): the p99 × 1.5, never below the busiest minute
   * seen, rounded up to two significant digits.
   */
  with_headroom: string
  /** Key-days the percentile is taken over. */
  key_days: number
  /** Set when too few key-days make the p99 the busiest minute itself. */
  note: string | null
  /** What that limit alone would have refused, and on how many keys. */
  would_refuse: Interval
  keys_refused: number
}

export interface TuneReport {
  from: string
  to: string
  days: number
  timezone: string
  series_read: number
  /** The store held more key-days than one report reads: the figures are of those read. */
  partial: boolean
  sections: SectionReport[]
  monthly: TeamReport[]
  suggestions: Suggestion[]
  /**
   * SPEC §4: calls of keys not kept by name (under usage.keep_after calls a day, and never near a
   * limit), by class: seen, and refused as recorded. No key's estimate holds them.
   */
  others: Record<string, { calls: number; refused_recorded: number }>
}

export interface TuneInput {
  running: Snapshot
  candidate: Snapshot
  store: ShapeStore
  days: number
  nowMs: number
  /** A team's admitted calls per day of a month before the range (the ledger), if known. */
  ledgerDays?: (team: string, month: string) => Promise<Map<string, number>>
  /** Every key's figures in each window's section (tests; `?keys=all`). */
  detail?: boolean
}

const ratesText = (r: readonly Window[] | undefined): string =>
  r === undefined || r.length === 0
    ? 'unlimited'
    : r.map((w) => `${w.limit}/${unitOf(w.windowMs)}`).join(', ')

function unitOf(ms: number): string {
  const units: [number, string][] = [
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'min'],
    [1000, 's'],
  ]
  for (const [u, name] of units) if (ms % u === 0) return ms === u ? name : `${ms / u}${name[0]}`
  return `${ms}ms`
}

const windowsOf = (r: RateList): Window[] =>
  r.map((x) => ({ limit: x.limit, windowMs: x.windowMs }))
const sameWindows = (a: readonly Window[] | undefined, b: readonly Window[] | undefined) =>
  ratesText(a) === ratesText(b)

/** One snapshot's windows of a key: section id → its windows and the families they count. */
type KeySections = Map<string, { windows: Window[]; families: Set<string> }>

function sectionsOf(
  snap: Snapshot,
  key: string,
  families: Iterable<string>,
  nowMs: number
): KeySections {
  const out: KeySections = new Map()
  const add = (id: string, windows: Window[], family: string) => {
    if (windows.length === 0) return
    let s = out.get(id)
    if (s === undefined) out.set(id, (s = { windows, families: new Set() }))
    s.families.add(family)
  }
  const isIp = key.startsWith('ip:')
  const ipKey = isIp ? key.slice(3) : '192.0.2.1'
  const uuid = isIp ? null : key.slice(5)
  for (const family of families) {
    if (family === CEILING) {
      if (isIp) add('ip_ceiling', windowsOf(snap.config.rateLimits.ipCeiling), family)
      continue
    }
    const { method, path } = callOfFamily(family, uuid)
    const c = snap.classifier.classify(method, path, ipKey, nowMs, ipKey)
    const byId = new Map<string, Window[]>()
    for (const ch of c.charges as Charge[]) {
      if (ch.kind === 'monthly') continue
      let id: string | null = null
      if (ch.kind === 'class') id = `class:${c.cls}`
      else if (ch.kind === 'rule' && !ch.dryRun) id = `rule:${ch.rule}`
      else if (ch.kind === 'ip_ceiling' && isIp) id = 'ip_ceiling'
      if (id === null) continue
      const list = byId.get(id) ?? []
      list.push({ limit: ch.limit, windowMs: ch.windowMs })
      byId.set(id, list)
    }
    for (const [id, w] of byId) add(id, w, family)
  }
  return out
}

/** The days of the range, oldest first: their ids and when each starts. */
export function rangeDays(nowMs: number, days: number, timeZone: string) {
  const out: { id: string; startMs: number }[] = []
  let d = dayBounds(nowMs, timeZone)
  for (let i = 0; i < days; i++) {
    out.unshift({ id: d.id, startMs: d.startMs })
    d = dayBounds(d.startMs - 1, timeZone)
  }
  return out
}

/** Each day's busiest aligned minute (bins coarser than a minute: their whole count, an upper bound). */
function busiestMinutes(t: Timeline, dayStarts: readonly number[]): number[] {
  const byDay = new Map<number, number>()
  let minute = -1
  let sum = 0
  let day = 0
  const close = () => {
    if (minute >= 0) byDay.set(day, Math.max(byDay.get(day) ?? 0, sum))
  }
  for (let i = 0; i < t.counts.length; i++) {
    const m = Math.floor(t.starts[i]! / 60_000)
    if (m !== minute) {
      close()
      minute = m
      sum = 0
      let k = 0
      while (k + 1 < dayStarts.length && dayStarts[k + 1]! <= t.starts[i]!) k++
      day = k
    }
    sum += t.counts[i]!
  }
  close()
  return [...byDay.values()]
}

/** The most calls a minute can hold under windows: L·60 s/W for a shorter window, L else. */
export function perMinute(windows: readonly Window[]): number | null {
  let most = Infinity
  for (const w of windows) {
    if (!Number.isFinite(w.limit)) continue
    most = Math.min(most, w.windowMs < 60_000 ? (w.limit * 60_000) / w.windowMs : w.limit)
  }
  return Number.isFinite(most) ? Math.floor(most) : null
}

const quantile = (sorted: readonly number[], q: number): number =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!

const add = (a: Interval, b: Bounds): void => {
  a.lo += b.lo
  a.hi += b.hi
}
const mid = (b: Interval) => (b.lo + b.hi) / 2

interface SectionAcc {
  id: string
  running?: Window[]
  candidate?: Window[]
  changed: boolean
  keys: number
  calls: number
  refusedRecorded: number
  running_refused: Interval
  candidate_refused: Interval
  /** The keys the candidate refuses most more, and most less (MOVERS each, largest first). */
  more: KeyMove[]
  fewer: KeyMove[]
  all: KeyMove[]
  /** For the suggestion: each key-day's busiest minute, and each key's busiest. */
  minutes: number[]
  keyBusiest: Map<string, number>
}

type Day = { id: string; startMs: number }
/** A key's days of one family. */
type KeyShapes = Map<string, { startMs: number; day: string; shape: ShapeDay }[]>
type TeamDays = Record<'running' | 'candidate', Map<string, Map<string, number>>>

/**
 * The key-days of the range, by key (at most MAX_SERIES_READ), compact: a family is interned
 * once, and a key's key-days are numbers (day index × 65,536 + family), so 100,000 keys index
 * in a few MB.
 */
interface RangeIndex {
  byKey: Map<string, number[]>
  families: string[]
  read: number
  partial: boolean
}

const FAMILY_BITS = 65_536

/**
 * A string of its own: V8 keeps a long slice as a view of the string it was cut from (100,000
 * keys held ~10 MB of series ids this way). UTF-16 code units, so any string comes back whole.
 */
const ownString = (s: string): string => Buffer.from(s, 'utf16le').toString('utf16le')

async function indexRange(store: ShapeStore, days: readonly Day[]): Promise<RangeIndex> {
  const byKey = new Map<string, number[]>()
  const familyIds = new Map<string, number>()
  const families: string[] = []
  let read = 0
  let partial = false
  for (let di = 0; di < days.length; di++) {
    const { series, more } = await store.seriesOf(days[di]!.id, MAX_SERIES_READ - read)
    if (more) partial = true
    read += series.length
    for (const sid of series) {
      const { key, family } = splitSeries(sid)
      let f = familyIds.get(family)
      if (f === undefined) {
        f = families.push(family) - 1
        familyIds.set(family, f)
      }
      const list = byKey.get(key)
      // A key kept is copied out of its series id: V8's slice would keep the whole id alive.
      if (list === undefined) byKey.set(ownString(key), [di * FAMILY_BITS + f])
      else list.push(di * FAMILY_BITS + f)
    }
  }
  return { byKey, families, read, partial }
}

/** Keys read together: their key-days of each day in one store call (one round trip a day). */
const KEYS_PER_READ = 256

/**
 * Keys' shapes over the range, KEYS_PER_READ keys at a time; `each` sees one key's shapes
 * (families kept: `keep`, all when absent), then they are let go. The next chunk is read while
 * this one is judged (the store works on its own core meanwhile), so memory holds two chunks.
 */
async function eachKeyShapes(
  store: ShapeStore,
  index: RangeIndex,
  days: readonly Day[],
  keys: Iterable<string>,
  each: (key: string, shapes: KeyShapes) => void,
  keep?: (key: string, family: string) => boolean
): Promise<void> {
  const fetch = async (chunk: readonly string[]): Promise<Map<string, KeyShapes>> => {
    const perDay = new Map<number, string[]>()
    for (const key of chunk) {
      for (const packed of index.byKey.get(key) ?? []) {
        const di = Math.floor(packed / FAMILY_BITS)
        const family = index.families[packed % FAMILY_BITS]!
        if (keep !== undefined && !keep(key, family)) continue
        let list = perDay.get(di)
        if (list === undefined) perDay.set(di, (list = []))
        list.push(seriesId(key, family))
      }
    }
    const got = await Promise.all(
      [...perDay].map(async ([di, series]) => [di, await store.read(days[di]!.id, series)] as const)
    )
    const byKey = new Map<string, KeyShapes>()
    for (const [di, shapes] of got) {
      const d = days[di]!
      for (const [sid, shape] of shapes) {
        const { key, family } = splitSeries(sid)
        let ks = byKey.get(key)
        if (ks === undefined) byKey.set(key, (ks = new Map()))
        let list = ks.get(family)
        if (list === undefined) ks.set(family, (list = []))
        list.push({ startMs: d.startMs, day: d.id, shape })
      }
    }
    return byKey
  }
  const chunks = function* () {
    let chunk: string[] = []
    for (const key of keys) {
      chunk.push(key)
      if (chunk.length >= KEYS_PER_READ) {
        yield chunk
        chunk = []
      }
    }
    if (chunk.length > 0) yield chunk
  }
  type Read = { chunk: string[]; shapes: Promise<Map<string, KeyShapes>> }
  const judge = async ({ chunk, shapes }: Read) => {
    const got = await shapes
    for (const key of chunk) each(key, got.get(key) ?? new Map())
  }
  let pending: Read | null = null
  for (const chunk of chunks()) {
    const next = { chunk, shapes: fetch(chunk) }
    // Awaited once the chunk before is judged; a failure meanwhile is not an unhandled rejection.
    next.shapes.catch(() => {})
    if (pending !== null) await judge(pending)
    pending = next
  }
  if (pending !== null) await judge(pending)
}

/** The timeline of some of a key's families (every day of the range). */
function timelineFor(shapes: KeyShapes, families: Iterable<string>): Timeline {
  const perDayParts = new Map<number, ShapeDay[]>()
  for (const f of families) {
    for (const s of shapes.get(f) ?? []) {
      const parts = perDayParts.get(s.startMs) ?? []
      parts.push(s.shape)
      perDayParts.set(s.startMs, parts)
    }
  }
  return timelineOf([...perDayParts].map(([startMs, parts]) => ({ startMs, parts })))
}

/** A key's timelines, each worked out once per set of families. */
function timelines(shapes: KeyShapes): (families: ReadonlySet<string>) => Timeline {
  const made = new Map<string, Timeline>()
  return (families) => {
    const id = [...families].sort().join('\n')
    let t = made.get(id)
    if (t === undefined) made.set(id, (t = timelineFor(shapes, families)))
    return t
  }
}

function newSection(id: string): SectionAcc {
  return {
    id,
    changed: false,
    keys: 0,
    calls: 0,
    refusedRecorded: 0,
    running_refused: { lo: 0, hi: 0 },
    candidate_refused: { lo: 0, hi: 0 },
    more: [],
    fewer: [],
    all: [],
    minutes: [],
    keyBusiest: new Map(),
  }
}

/** Keeps the MOVERS moves of largest `by` in `top` (sorted, largest first). */
function keepTop(top: KeyMove[], m: KeyMove, by: (m: KeyMove) => number): void {
  const v = by(m)
  if (top.length === MOVERS && v <= by(top[MOVERS - 1]!)) return
  let i = top.length
  while (i > 0 && by(top[i - 1]!) < v) i--
  top.splice(i, 0, m)
  if (top.length > MOVERS) top.length = MOVERS
}

/** One key judged under both files, into each section that counts it. */
function judgeKey(
  input: TuneInput,
  key: string,
  shapes: KeyShapes,
  sectionAt: (id: string) => SectionAcc,
  dayStarts: readonly number[]
): void {
  const { running, candidate, nowMs } = input
  const inRunning = sectionsOf(running, key, shapes.keys(), nowMs)
  const inCandidate = sectionsOf(candidate, key, shapes.keys(), nowMs)
  const timelineOfFamilies = timelines(shapes)
  const team = (snap: Snapshot) =>
    key.startsWith('base:') ? (snap.teamOfBase.get(key.slice(5))?.id ?? null) : null
  for (const id of new Set([...inRunning.keys(), ...inCandidate.keys()])) {
    const r = inRunning.get(id)
    const c = inCandidate.get(id)
    const fams = new Set([...(r?.families ?? []), ...(c?.families ?? [])])
    const acc = sectionAt(id)
    acc.running ??= r?.windows
    acc.candidate ??= c?.windows
    const sameFamilies =
      r !== undefined &&
      c !== undefined &&
      r.families.size === c.families.size &&
      [...r.families].every((f) => c.families.has(f))
    if (!sameWindows(r?.windows, c?.windows) || !sameFamilies) acc.changed = true
    acc.keys++
    const calls = timelineOfFamilies(fams).total
    acc.calls += calls
    for (const f of fams)
      for (const s of shapes.get(f) ?? [])
        acc.refusedRecorded += s.shape.refusedRate + s.shape.refusedMonthly
    const rb = r === undefined ? NONE : refusals(timelineOfFamilies(r.families), r.windows)
    const cb = c === undefined ? NONE : refusals(timelineOfFamilies(c.families), c.windows)
    add(acc.running_refused, rb)
    add(acc.candidate_refused, cb)
    const move: KeyMove = {
      key: shownKey(key), // SPEC §7: as operators search for it
      team: team(candidate) ?? team(running),
      calls,
      running: rb,
      candidate: cb,
    }
    const delta = mid(cb) - mid(rb)
    if (delta > 0) keepTop(acc.more, move, (m) => mid(m.candidate) - mid(m.running))
    else if (delta < 0) keepTop(acc.fewer, move, (m) => mid(m.running) - mid(m.candidate))
    if (input.detail === true) acc.all.push(move)
    // The keys' busiest minutes under the limit in force, or (issue #49) under a rule the
    // candidate adds, so a new rule gets a suggestion too.
    const basis = r ?? c
    if (basis !== undefined) {
      const m = busiestMinutes(timelineOfFamilies(basis.families), dayStarts)
      for (const x of m) acc.minutes.push(x)
      acc.keyBusiest.set(key, m.length === 0 ? 0 : Math.max(...m))
    }
  }
}

const NONE: Bounds = { lo: 0, hi: 0 }

/** SPEC §5 under each file: the calls a base's month would count (not refused by a rate), by day. */
function countTeamDays(
  input: TuneInput,
  key: string,
  shapes: KeyShapes,
  teamDays: TeamDays,
  teamBases: ReadonlySet<string>
): void {
  if (!key.startsWith('base:')) return
  const uuid = key.slice(5)
  // Only a team's bases are read by monthlyOf (a base in no team holds nothing here).
  if (!teamBases.has(uuid)) return
  for (const which of ['running', 'candidate'] as const) {
    const snap = input[which]
    const perDayCalls = new Map<string, number>()
    for (const [family, list] of shapes) {
      if (family === CEILING) continue
      const { method, path } = callOfFamily(family, uuid)
      const cls = snap.classifier.classify(method, path, '192.0.2.1', input.nowMs).cls
      if (cls !== 'base' && cls !== 'account') continue
      for (const s of list) {
        const n = s.shape.total - s.shape.refusedRate
        perDayCalls.set(s.day, (perDayCalls.get(s.day) ?? 0) + n)
      }
    }
    teamDays[which].set(uuid, perDayCalls)
  }
}

function sectionReport(s: SectionAcc, detail: boolean): SectionReport {
  return {
    id: s.id,
    running: ratesText(s.running),
    candidate: ratesText(s.candidate),
    keys: s.keys,
    calls: s.calls,
    refused_recorded: s.refusedRecorded,
    running_refused: s.running_refused,
    candidate_refused: s.candidate_refused,
    more_refused: s.more,
    fewer_refused: s.fewer,
    ...(detail ? { key_detail: s.all } : {}),
  }
}

export async function tuneReport(input: TuneInput): Promise<TuneReport> {
  const timeZone = input.running.config.monthly.timezone
  const days = rangeDays(input.nowMs, input.days, timeZone)
  const dayStarts = days.map((d) => d.startMs)
  const index = await indexRange(input.store, days)
  const { read, partial } = index
  const sections = new Map<string, SectionAcc>()
  const sectionAt = (id: string): SectionAcc => {
    let s = sections.get(id)
    if (s === undefined) sections.set(id, (s = newSection(id)))
    return s
  }
  const teamDays: TeamDays = { running: new Map(), candidate: new Map() }
  const teamBases = new Set<string>()
  for (const snap of [input.running, input.candidate])
    for (const t of snap.teams) for (const b of t.bases) teamBases.add(b)
  const others: TuneReport['others'] = {}
  await eachKeyShapes(input.store, index, days, index.byKey.keys(), (key, shapes) => {
    if (isOthers(key)) {
      const o = (others[key.slice(7)] ??= { calls: 0, refused_recorded: 0 })
      for (const list of shapes.values())
        for (const s of list) {
          o.calls += s.shape.total
          o.refused_recorded += s.shape.refusedRate + s.shape.refusedMonthly
        }
      return
    }
    judgeKey(input, key, shapes, sectionAt, dayStarts)
    countTeamDays(input, key, shapes, teamDays, teamBases)
  })
  const out: SectionReport[] = []
  const suggestions: Suggestion[] = []
  for (const s of [...sections.values()].sort((a, b) => a.id.localeCompare(b.id))) {
    if (s.changed) out.push(sectionReport(s, input.detail === true))
    if (s.minutes.length > 0) suggestions.push(await suggest(s, input, days, index))
  }
  return {
    from: days[0]!.id,
    to: days.at(-1)!.id,
    days: days.length,
    timezone: timeZone,
    series_read: read,
    partial,
    sections: out,
    monthly: await monthlyOf(input, days, teamDays),
    suggestions,
    others,
  }
}

/** Under this many key-days a 99th percentile is the busiest one or next to it. */
const FEW_KEY_DAYS = 100

/**
 * A limit to set from the fit (issue #49): the p99 × 1.5, never below the busiest minute seen,
 * rounded up to two significant digits (587 → 590, 1,234 → 1,300).
 */
export function withHeadroom(p99: number, busiest: number): number {
  const n = Math.max(Math.ceil(p99 * 1.5), busiest, 1)
  const step = 10 ** Math.max(0, Math.floor(Math.log10(n)) - 1)
  return Math.ceil(n / step) * step
}

/**
 * A section's suggestion: the 99th percentile of its key-days' busiest minutes as N/min, and
 * what that limit alone would have refused (only keys whose busiest minute passed half of it
 * can be refused by a 1-minute window: they are read again).
 */
async function suggest(
  s: SectionAcc,
  input: TuneInput,
  days: readonly Day[],
  index: RangeIndex
): Promise<Suggestion> {
  const { nowMs } = input
  // A rule only the candidate has is judged on the families it would count.
  const inForce = s.running !== undefined
  const snap = inForce ? input.running : input.candidate
  const sorted = [...s.minutes].sort((a, b) => a - b)
  const keyMax = [...s.keyBusiest.values()].sort((a, b) => a - b)
  const n = Math.max(1, quantile(sorted, 0.99))
  const window: Window = { limit: n, windowMs: 60_000 }
  const refused: Interval = { lo: 0, hi: 0 }
  let keysRefused = 0
  const reread: string[] = []
  for (const [key, busiest] of s.keyBusiest) if (busiest * 2 > n) reread.push(key)
  // Each key's families are read whole, and those the section counts picked here (a set per
  // key held for the whole pass would cost more than the bytes read twice).
  await eachKeyShapes(input.store, index, days, reread, (key, shapes) => {
    const counted = sectionsOf(snap, key, shapes.keys(), nowMs).get(s.id)?.families
    if (counted === undefined) return
    const b = refusals(timelineFor(shapes, counted), [window])
    add(refused, b)
    if (b.hi > 0) keysRefused++
  })
  return {
    id: s.id,
    limit: inForce
      ? ratesText(s.running)
      : `none (new in the candidate: ${ratesText(s.candidate)})`,
    per_minute: inForce ? perMinute(s.running ?? []) : null,
    keys: s.keyBusiest.size,
    busiest_minute: {
      p50: quantile(keyMax, 0.5),
      p90: quantile(keyMax, 0.9),
      p99: quantile(keyMax, 0.99),
      max: keyMax.at(-1) ?? 0,
    },
    suggested: `${n}/min`,
    with_headroom: `${withHeadroom(n, keyMax.at(-1) ?? 0)}/min`,
    key_days: sorted.length,
    note:
      sorted.length < FEW_KEY_DAYS
        ? `only ${sorted.length} key-day${sorted.length === 1 ? '' : 's'}: too few for a percentile (the p99 is about the busiest minute); ask for more days`
        : null,
    would_refuse: refused,
    keys_refused: keysRefused,
  }
}

/** SPEC §11 monthly: for each team whose quota or bases differ, the day each month runs out. */
async function monthlyOf(
  input: TuneInput,
  days: readonly Day[],
  teamDays: TeamDays
): Promise<TeamReport[]> {
  const { running, candidate } = input
  const quotaIn = (snap: Snapshot, id: string) => {
    if (!snap.config.monthly.enabled) return null
    return snap.teams.find((t) => t.id === id)?.quota ?? null
  }
  const basesIn = (snap: Snapshot, id: string) =>
    [...(snap.teams.find((t) => t.id === id)?.bases ?? [])].sort().join(',')
  const ids = new Set([...running.teams.map((t) => t.id), ...candidate.teams.map((t) => t.id)])
  const out: TeamReport[] = []
  for (const id of [...ids].sort()) {
    const rq = quotaIn(running, id)
    const cq = quotaIn(candidate, id)
    if (rq === cq && basesIn(running, id) === basesIn(candidate, id)) continue
    const callsOn = (which: 'running' | 'candidate', snap: Snapshot) => {
      const perDay = new Map<string, number>()
      for (const b of snap.teams.find((t) => t.id === id)?.bases ?? [])
        for (const [d, n] of teamDays[which].get(b) ?? []) perDay.set(d, (perDay.get(d) ?? 0) + n)
      return perDay
    }
    const rc = callsOn('running', running)
    const cc = callsOn('candidate', candidate)
    const months: TeamMonth[] = []
    for (const month of [...new Set(days.map((d) => d.id.slice(0, 7)))]) {
      const inMonth = days.filter((d) => d.id.startsWith(month))
      // Days of the month before the range: what the ledger counted (the running file's).
      let before = 0
      let unread: string | null = null
      if (!inMonth[0]!.id.endsWith('-01') && input.ledgerDays !== undefined) {
        const ledger = await input.ledgerDays(id, month).catch((err: unknown) => {
          unread = `the ledger could not be read (${err instanceof Error ? err.message : String(err)}): the days of ${month} before ${inMonth[0]!.id} are not counted, so a run-out day may be late`
          return new Map<string, number>()
        })
        for (const [dd, n] of ledger) if (`${month}-${dd}` < inMonth[0]!.id) before += n
      }
      const runsOut = (perDay: Map<string, number>, quota: number | null) => {
        if (quota === null) return null
        let sum = before
        for (const d of inMonth) {
          sum += perDay.get(d.id) ?? 0
          if (sum >= quota) return d.id
        }
        return null
      }
      months.push({
        month,
        calls: before + inMonth.reduce((a, d) => a + (cc.get(d.id) ?? 0), 0),
        running_runs_out: runsOut(rc, rq),
        candidate_runs_out: runsOut(cc, cq),
        ledger_unread: unread,
      })
    }
    out.push({ team: id, running_quota: rq, candidate_quota: cq, months })
  }
  return out
}
