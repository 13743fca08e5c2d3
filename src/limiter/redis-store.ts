import { readFileSync } from 'node:fs'
import calculateSlot from 'cluster-key-slot'
import type { Cluster, Redis } from 'ioredis'
import {
  BUCKETS_PER_WINDOW,
  windowMsOf,
  type Charge,
  type Decision,
  type LimiterStore,
} from '../types.js'
import { systemClock, type Clock } from '../clock.js'
import { admitNothing, toWindowState } from './decision.js'
import { StoreError } from './store-error.js'

const SCRIPT = readFileSync(new URL('./sliding-window.lua', import.meta.url), 'utf8')

type ScriptClient = (Redis | Cluster) & {
  basegateConsume(numKeys: number, ...args: (string | number)[]): Promise<number[]>
}

export interface RedisStoreOptions {
  /** Prepended to every key (store.prefix). */
  prefix: string
  /** Redis Cluster: a request's windows may span slots (see consume). */
  cluster?: boolean
  /** The caller's timeout for one call (store.timeout_ms): the script's deadline. */
  timeoutMs?: number
  /** This process's clock (for the store clock's offset); the system's by default. */
  clock?: Clock
}

const enum Mode {
  Charge = 0,
  Peek = 1,
  GiveBack = 3,
}

/** The script's answers per window (used, resetAt, retryAt, limit, charged). */
const ANSWERS_PER_WINDOW = 5

/**
 * Counters in Redis: one EVALSHA per request for all its windows (ioredis defineCommand sends
 * EVALSHA and falls back to EVAL once after a restart flushed the script cache).
 */
export class RedisStore implements LimiterStore {
  private readonly client: ScriptClient
  private offsetMs = 0
  private offsetAtMs = 0
  private offsetKnown = false
  private readonly clock: Clock

  constructor(
    client: Redis | Cluster,
    private readonly opts: RedisStoreOptions
  ) {
    client.defineCommand('basegateConsume', { lua: SCRIPT })
    this.client = client as ScriptClient
    this.clock = opts.clock ?? systemClock
  }

  /**
   * The time the script buckets a call at: 0 asks it for the store's own clock (TIME), one
   * clock for every instance sharing the store (SPEC §3). Always so in production; a test
   * helper overrides it to drive time by hand (test/helpers/caller-clock.ts).
   */
  protected bucketTimeArg(_nowMs: number): number {
    return 0
  }

  /**
   * `asks` (limiter/leases.ts): per window, the calls to charge as a lease (0: none). A
   * request whose windows span Cluster slots takes no lease: giving a share back after a later
   * slot refused would need a second refund path for little gain.
   */
  consume(charges: readonly Charge[], nowMs: number, asks?: readonly number[]): Promise<Decision> {
    if (this.opts.cluster && charges.length > 1) {
      const groups = this.bySlot(charges)
      if (groups.length > 1) return this.consumeAcrossSlots(charges, groups, nowMs)
    }
    return this.run(charges, nowMs, Mode.Charge, asks)
  }

  /**
   * Takes back calls charged earlier (`units[i]` of window i), each from the bucket it was
   * charged in (`atMs[i]`, on the decision's clock): unused lease shares, and the refund of a
   * request refused on a later Cluster slot. One script call, or one per slot on a Cluster.
   */
  async giveBack(
    charges: readonly Charge[],
    units: readonly number[],
    atMs: readonly number[]
  ): Promise<void> {
    const groups = this.opts.cluster ? this.bySlot(charges) : [charges.map((_, i) => i)]
    await Promise.all(
      groups.map((g) =>
        this.run(
          pick(charges, g),
          atMs[g[0]!]!,
          Mode.GiveBack,
          g.map((i) => units[i]!),
          g.map((i) => atMs[i]!)
        )
      )
    )
  }

  async peek(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    if (!this.opts.cluster || charges.length < 2) return this.run(charges, nowMs, Mode.Peek)
    const groups = this.bySlot(charges)
    const parts = await Promise.all(groups.map((g) => this.run(pick(charges, g), nowMs, Mode.Peek)))
    return merge(charges.length, groups, parts)
  }

  /** Indexes of the charges, grouped by Cluster slot, in order of first appearance. */
  private bySlot(charges: readonly Charge[]): number[][] {
    const groups = new Map<number, number[]>()
    for (let i = 0; i < charges.length; i++) {
      const slot = calculateSlot(this.opts.prefix + charges[i]!.key)
      const g = groups.get(slot)
      if (g) g.push(i)
      else groups.set(slot, [i])
    }
    return [...groups.values()]
  }

  /**
   * Redis Cluster runs a script on one slot, and a request's windows may span slots (see
   * limiter/keys.ts). Such a request is checked slot by slot, in order; if a later slot
   * refuses, the earlier ones are refunded (the call given back to the bucket it was charged
   * in, on the store's clock at that charge). Until the refund the count is one high, which can
   * only refuse, never admit, a call: SPEC §3 holds.
   */
  private async consumeAcrossSlots(
    charges: readonly Charge[],
    groups: number[][],
    nowMs: number
  ): Promise<Decision> {
    const parts: Decision[] = []
    for (let g = 0; g < groups.length; g++) {
      const part = await this.run(pick(charges, groups[g]!), nowMs, Mode.Charge)
      parts.push(part)
      if (part.allowed) continue
      for (let r = 0; r < g; r++) await this.refund(charges, groups[r]!, parts[r]!)
      for (let rest = g + 1; rest < groups.length; rest++) {
        parts.push(await this.run(pick(charges, groups[rest]!), nowMs, Mode.Peek))
      }
      return { ...merge(charges.length, groups, parts), allowed: false }
    }
    return merge(charges.length, groups, parts)
  }

  /** Takes back one slot's charge (a dry-run rule that was over was never charged). */
  private async refund(charges: readonly Charge[], group: number[], part: Decision): Promise<void> {
    const charged = group.filter((i, j) => {
      const c = charges[i]!
      return !(c.kind === 'rule' && c.dryRun && part.windows[j]!.retryAtMs !== 0)
    })
    const ones = charged.map(() => 1)
    await this.giveBack(
      pick(charges, charged),
      ones,
      ones.map(() => part.nowMs)
    ).catch(() => {})
    for (const w of part.windows) {
      w.used -= 1
      w.remaining = Math.max(0, w.limit - w.used)
    }
  }

  /** The store's clock as this process estimates it (for the script's deadline). */
  private storeNowMs(localMs: number): number {
    return localMs + this.offsetMs
  }

  /**
   * Learns the store clock's offset from an answer: storeNow - sentAt is the offset plus the
   * time the call took to reach Redis, so the smallest recent sample is the best estimate.
   */
  private learnOffset(storeNowMs: number, sentLocalMs: number): void {
    const sample = storeNowMs - sentLocalMs
    const local = this.clock.now()
    if (!this.offsetKnown || sample < this.offsetMs || local - this.offsetAtMs > 10_000) {
      this.offsetMs = sample
      this.offsetAtMs = local
      this.offsetKnown = true
    }
  }

  private async run(
    charges: readonly Charge[],
    nowMs: number,
    mode: Mode,
    asks?: readonly number[],
    chargedAtMs?: readonly number[]
  ): Promise<Decision> {
    const n = charges.length
    if (n === 0) return admitNothing(nowMs)
    const prefix = this.opts.prefix
    const keys: string[] = new Array(n)
    const sentMs = this.clock.now()
    const callerNow = this.bucketTimeArg(nowMs)
    // Issue #11: a call the caller has given up on (its timeout) must never charge later; the
    // script compares this deadline with its own clock. The client's timer starts when the
    // command is written, a little after sentMs, so the script gives up no later than it.
    const at =
      mode === Mode.Charge && callerNow === 0 && this.offsetKnown && this.opts.timeoutMs
        ? this.storeNowMs(sentMs) + this.opts.timeoutMs
        : 0
    const argv: (string | number)[] = [BUCKETS_PER_WINDOW, 1, mode, at, callerNow]
    for (let i = 0; i < n; i++) {
      const c = charges[i]!
      keys[i] = prefix + c.key
      let limitIndex = 0
      if (c.kind === 'monthly') {
        const full = prefix + c.limitKey
        let at = keys.indexOf(full, n)
        if (at === -1) at = keys.push(full) - 1
        limitIndex = at + 1 // Lua's KEYS is 1-based
      }
      // A give-back names the time of the charge in the calendar-end field (sliding-window.lua).
      const endMs = c.kind === 'monthly' ? c.endMs : (chargedAtMs?.[i] ?? 0)
      const shadow = c.kind === 'rule' && c.dryRun ? 1 : 0
      argv.push(c.limit, windowMsOf(c), endMs, limitIndex, shadow, asks?.[i] ?? 0)
    }
    let raw: number[]
    try {
      raw = await this.client.basegateConsume(keys.length, ...keys, ...argv)
    } catch (err) {
      throw new StoreError(`redis: ${(err as Error).message}`, { cause: err })
    }
    const decisionNow = raw[1]!
    const storeNow = raw[2]!
    this.learnOffset(storeNow, sentMs)
    if (raw[0] === -1) throw new StoreError('redis: the call reached the store after its deadline')
    if (mode === Mode.GiveBack) return admitNothing(decisionNow)
    const windows = new Array(n)
    let charged: number[] | undefined
    for (let i = 0; i < n; i++) {
      const o = 3 + ANSWERS_PER_WINDOW * i
      windows[i] = toWindowState(raw[o]!, raw[o + 1]!, raw[o + 2]!, decisionNow, raw[o + 3]!)
      if (asks !== undefined) (charged ??= new Array(n))[i] = raw[o + 4]!
    }
    const d: Decision = { allowed: raw[0] === 1, windows, nowMs: decisionNow, storeMs: storeNow }
    if (charged !== undefined) d.charged = charged
    return d
  }

  async ready(): Promise<boolean> {
    if (this.opts.cluster) {
      // Ready when the cluster as a whole says so (every slot served).
      try {
        const info = (await (this.client as Cluster).cluster('INFO')) as string
        return info.includes('cluster_state:ok')
      } catch {
        return false
      }
    }
    try {
      return (await this.client.ping()) === 'PONG'
    } catch {
      return false
    }
  }

  async close(): Promise<void> {
    try {
      await this.client.quit()
    } catch {
      this.client.disconnect()
    }
  }
}

/** Puts per-slot decisions back in the order of the request's charges. */
function merge(n: number, groups: number[][], parts: Decision[]): Decision {
  const windows = new Array(n)
  let allowed = true
  for (let g = 0; g < groups.length; g++) {
    const part = parts[g]!
    if (!part.allowed) allowed = false
    groups[g]!.forEach((i, j) => (windows[i] = part.windows[j]))
  }
  return { allowed, windows, nowMs: parts[0]!.nowMs, storeMs: parts[0]?.storeMs }
}

function pick(charges: readonly Charge[], indexes: readonly number[]): Charge[] {
  return indexes.map((i) => charges[i]!)
}
