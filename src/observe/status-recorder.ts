import { HEALTHY, HealthMachine, mergeHealth, type HealthView } from './health.js'

// SPEC §7's status page: the last 15 minutes of calls, per 10-second step by class and outcome,
// and the busiest keys, kept in this process (a primary merges its workers'). Recording is two
// map increments per request; memory is bounded (90 steps; at most MAX_KEYS keys a minute).

export const STEP_S = 10
export const STEPS = 90
const MINUTES = 15
/** Keys counted per minute; past it a new key of that minute is not counted (busiest stay). */
const MAX_KEYS = 20_000

/** What one process (or a primary, merged) shows of its last 15 minutes. */
export interface StatusCounts {
  /** The last step's start (epoch seconds, a multiple of STEP_S); the series end there. */
  endS: number
  /** `<class>/<outcome>` → calls per step, oldest first (STEPS long). */
  series: Record<string, number[]>
  /** Calls per key over the 15 minutes, busiest first (at most `top`), admitted and refused apart. */
  busiest: Busy[]
  /** What the server made of the calls that reached it, per step (issue #34: its health). */
  upstream: UpstreamCounts
}

/** Calls that went to the server, per step: how many, how many failed, how long they took. */
export interface UpstreamCounts {
  /** Calls that reached (or tried to reach) the server, per step, oldest first. */
  calls: number[]
  /** Of them, answered 5xx by the server or failed (502, 504), per step. */
  errors: number[]
  /** Their time to the server's headers, summed per step (ms). */
  ms: number[]
  /** The last failure: when (epoch ms), its status, and the error where there was one. */
  last_error: { at: number; status: number; error: string | null } | null
  /** Issue #41: failing now (since when), and the last failure that ended. */
  health: HealthView
}

/** A busy key: its calls, and how many of them were admitted and refused. */
export interface Busy {
  key: string
  calls: number
  admitted: number
  refused: number
}

/** The outcomes that are basegate's refusals (the rest were admitted and went on). */
const REFUSED = new Set([
  'rate_limited',
  'monthly_limited',
  'size_refused',
  'key_in_flight',
  'shed',
  'upstream_share',
  'body_unavailable',
  'body_timeout',
  'bad_path',
  'bad_request',
  'store_unavailable',
  'gone',
])

/**
 * One request as the server saw it: the forwarded and upstream_error outcomes are such (no
 * object is made per call; the outcome itself is passed).
 */
export interface UpstreamSeen {
  status: number
  upstreamMs: number | null
  error?: string
}

interface Step {
  startS: number
  /** class → outcome → calls. */
  counts: Map<string, Map<string, number>>
  upstreamCalls: number
  upstreamErrors: number
  upstreamMs: number
}

interface Minute {
  startS: number
  /** key → [admitted, refused]. */
  keys: Map<string, [number, number]>
}

export class StatusRecorder {
  private readonly steps: Step[] = []
  private readonly minutes: Minute[] = []
  private lastError: UpstreamCounts['last_error'] = null
  private readonly health: HealthMachine

  constructor(onHealth?: (failing: boolean, view: HealthView) => void) {
    this.health = new HealthMachine({ share: true, onChange: onHealth })
  }

  /**
   * One request's ending: its class, its outcome, its key (if it had one), and what the server
   * made of it (if it reached the server).
   */
  record(
    cls: string,
    outcome: string,
    key: string | undefined,
    nowMs: number,
    upstream?: UpstreamSeen | null
  ): void {
    const s = Math.floor(nowMs / 1000)
    const step = this.stepAt(s - (s % STEP_S))
    if (upstream != null) this.seen(step, upstream, nowMs)
    // Nested by class, then outcome: no string built per request.
    let byOutcome = step.counts.get(cls)
    if (byOutcome === undefined) step.counts.set(cls, (byOutcome = new Map()))
    byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1)
    if (key === undefined) return
    const minute = this.minuteAt(s - (s % 60))
    const refused = REFUSED.has(outcome) ? 1 : 0
    const n = minute.keys.get(key)
    if (n !== undefined) n[refused]!++
    else if (minute.keys.size < MAX_KEYS) minute.keys.set(key, refused ? [0, 1] : [1, 0])
  }

  /** A call that reached the server: its health, counted in its step. */
  private seen(step: Step, u: UpstreamSeen, nowMs: number): void {
    step.upstreamCalls++
    if (u.upstreamMs !== null) step.upstreamMs += u.upstreamMs
    const failed = u.status >= 500 || u.error !== undefined
    this.health.seen(nowMs, failed, failed ? upstreamWords(u) : null)
    if (failed) {
      step.upstreamErrors++
      this.lastError = { at: nowMs, status: u.status, error: u.error ?? null }
    }
  }

  private stepAt(startS: number): Step {
    const last = this.steps[this.steps.length - 1]
    if (last !== undefined && last.startS === startS) return last
    const step: Step = {
      startS,
      counts: new Map(),
      upstreamCalls: 0,
      upstreamErrors: 0,
      upstreamMs: 0,
    }
    this.steps.push(step)
    while (this.steps.length > STEPS) this.steps.shift()
    return step
  }

  private minuteAt(startS: number): Minute {
    const last = this.minutes[this.minutes.length - 1]
    if (last !== undefined && last.startS === startS) return last
    const minute: Minute = { startS, keys: new Map() }
    this.minutes.push(minute)
    while (this.minutes.length > MINUTES) this.minutes.shift()
    return minute
  }

  /** The server's state now. */
  upstreamHealth(): HealthView {
    return this.health.view()
  }

  /** The last 15 minutes as of `nowMs`. */
  counts(nowMs: number, top = 10): StatusCounts {
    const s = Math.floor(nowMs / 1000)
    const endS = s - (s % STEP_S)
    const firstS = endS - (STEPS - 1) * STEP_S
    const series: Record<string, number[]> = {}
    const upstream = emptyUpstream()
    upstream.last_error = this.lastError
    upstream.health = this.health.view()
    for (const step of this.steps) {
      if (step.startS < firstS || step.startS > endS) continue
      const i = (step.startS - firstS) / STEP_S
      upstream.calls[i] = step.upstreamCalls
      upstream.errors[i] = step.upstreamErrors
      upstream.ms[i] = step.upstreamMs
      for (const [cls, byOutcome] of step.counts) {
        for (const [outcome, n] of byOutcome) {
          const values = (series[`${cls}/${outcome}`] ??= new Array<number>(STEPS).fill(0))
          values[i] = values[i]! + n
        }
      }
    }
    const calls = new Map<string, [number, number]>()
    for (const m of this.minutes) {
      if (m.startS <= s - MINUTES * 60) continue
      for (const [key, [a, r]] of m.keys) addBusy(calls, key, a, r)
    }
    return { endS, series, busiest: topOf(calls, top), upstream }
  }
}

/** A failure as the page says it: `502 ECONNREFUSED`, `503`. */
function upstreamWords(u: UpstreamSeen): string {
  return u.error === undefined ? String(u.status) : `${u.status || ''} ${u.error}`.trim()
}

/** Whether the server is failing now (the gauge basegate_upstream_up reads it). */
export function upstreamUp(r: StatusRecorder): boolean {
  return r.upstreamHealth().state === 'ok'
}

function addBusy(calls: Map<string, [number, number]>, key: string, a: number, r: number): void {
  const had = calls.get(key)
  if (had === undefined) calls.set(key, [a, r])
  else {
    had[0] += a
    had[1] += r
  }
}

function emptyUpstream(): UpstreamCounts {
  const zeroes = () => new Array<number>(STEPS).fill(0)
  return { calls: zeroes(), errors: zeroes(), ms: zeroes(), last_error: null, health: HEALTHY }
}

function topOf(calls: Map<string, [number, number]>, top: number): Busy[] {
  return [...calls]
    .map(([key, [admitted, refused]]) => ({ key, calls: admitted + refused, admitted, refused }))
    .sort((a, b) => b.calls - a.calls || (a.key < b.key ? -1 : 1))
    .slice(0, top)
}

/** Adds a process's steps into the merged ones, `shift` steps older (its clock was behind). */
function addShifted(into: number[], values: readonly number[], shift: number): void {
  values.forEach((v, i) => {
    if (i - shift >= 0) into[i - shift]! += v
  })
}

/**
 * Several processes' counts as one (a primary and its workers): the series add up step by step
 * (aligned on their end), and so do the keys' calls. A worker hands over its busiest 200, so a
 * key busy across workers still ranks.
 */
export function mergeCounts(parts: readonly StatusCounts[], top = 10): StatusCounts {
  const endS = Math.max(0, ...parts.map((p) => p.endS))
  const series: Record<string, number[]> = {}
  const calls = new Map<string, [number, number]>()
  const upstream = emptyUpstream()
  upstream.health = mergeHealth(parts.map((p) => p.upstream.health))
  for (const p of parts) {
    const shift = (endS - p.endS) / STEP_S
    for (const k of ['calls', 'errors', 'ms'] as const)
      addShifted(upstream[k], p.upstream[k], shift)
    const le = p.upstream.last_error
    if (le !== null && (upstream.last_error === null || le.at > upstream.last_error.at))
      upstream.last_error = le
    for (const [name, values] of Object.entries(p.series)) {
      addShifted((series[name] ??= new Array<number>(STEPS).fill(0)), values, shift)
    }
    for (const b of p.busiest) addBusy(calls, b.key, b.admitted, b.refused)
  }
  return { endS, series, busiest: topOf(calls, top), upstream }
}
