import { readFileSync } from 'node:fs'
import calculateSlot from 'cluster-key-slot'
import type { Cluster, Redis } from 'ioredis'
import type { Charge, Decision, LimiterStore } from '../types.js'
import { ADMIT_NOTHING_TO_CHECK, toWindowState } from './decision.js'
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
}

const enum Mode {
  Charge = 0,
  Peek = 1,
  Force = 2,
}

/**
 * Counters in Redis: one EVALSHA per request for all its windows (ioredis defineCommand sends
 * EVALSHA and falls back to EVAL once after a restart flushed the script cache).
 */
export class RedisStore implements LimiterStore {
  private readonly client: ScriptClient

  constructor(
    client: Redis | Cluster,
    private readonly opts: RedisStoreOptions
  ) {
    client.defineCommand('basegateConsume', { lua: SCRIPT })
    this.client = client as ScriptClient
  }

  consume(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    if (this.opts.cluster && charges.length > 1) {
      const groups = this.bySlot(charges)
      if (groups.length > 1) return this.consumeAcrossSlots(charges, groups, nowMs)
    }
    return this.run(charges, nowMs, Mode.Charge)
  }

  async peek(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    if (!this.opts.cluster || charges.length < 2) return this.run(charges, nowMs, Mode.Peek)
    const groups = this.bySlot(charges)
    const parts = await Promise.all(
      groups.map((g) =>
        this.run(
          g.map((i) => charges[i]!),
          nowMs,
          Mode.Peek
        )
      )
    )
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
   * Redis Cluster runs a script on one slot. The key builder puts every window of a request's
   * subject in one slot; only `ip_ceiling` (which follows the client across bases) lands in
   * another. Such a request is checked slot by slot, in order; if a later slot refuses, the
   * earlier ones are refunded (a forced charge of -1 in the same bucket). Until the refund the
   * count is one high, which can only refuse, never admit, a call: SPEC §3 holds.
   */
  private async consumeAcrossSlots(
    charges: readonly Charge[],
    groups: number[][],
    nowMs: number
  ): Promise<Decision> {
    const parts: Decision[] = []
    for (let g = 0; g < groups.length; g++) {
      const part = await this.run(
        groups[g]!.map((i) => charges[i]!),
        nowMs,
        Mode.Charge
      )
      parts.push(part)
      if (part.allowed) continue
      for (let r = 0; r < g; r++) {
        await this.run(
          groups[r]!.map((i) => charges[i]!),
          nowMs,
          Mode.Force,
          -1
        ).catch(() => {})
        for (const w of parts[r]!.windows) {
          w.used -= 1
          w.remaining = Math.max(0, w.limit - w.used)
        }
      }
      for (let rest = g + 1; rest < groups.length; rest++) {
        parts.push(
          await this.run(
            groups[rest]!.map((i) => charges[i]!),
            nowMs,
            Mode.Peek
          )
        )
      }
      return { ...merge(charges.length, groups, parts), allowed: false }
    }
    return merge(charges.length, groups, parts)
  }

  private async run(
    charges: readonly Charge[],
    nowMs: number,
    mode: Mode,
    cost = 1
  ): Promise<Decision> {
    const n = charges.length
    if (n === 0) return ADMIT_NOTHING_TO_CHECK
    const prefix = this.opts.prefix
    const keys: string[] = new Array(n)
    const argv: (string | number)[] = [nowMs, cost, mode]
    for (let i = 0; i < n; i++) {
      const c = charges[i]!
      keys[i] = prefix + c.key
      let limitIndex = 0
      if (c.limitKey !== undefined) {
        const full = prefix + c.limitKey
        let at = keys.indexOf(full, n)
        if (at === -1) at = keys.push(full) - 1
        limitIndex = at + 1 // Lua's KEYS is 1-based
      }
      argv.push(c.limit, c.windowMs, c.endMs ?? 0, limitIndex)
    }
    let raw: number[]
    try {
      raw = await this.client.basegateConsume(keys.length, ...keys, ...argv)
    } catch (err) {
      throw new StoreError(`redis: ${(err as Error).message}`, { cause: err })
    }
    const windows = new Array(n)
    for (let i = 0; i < n; i++) {
      const o = 1 + 4 * i
      windows[i] = toWindowState(charges[i]!, raw[o]!, raw[o + 1]!, raw[o + 2]!, nowMs, raw[o + 3]!)
    }
    return { allowed: raw[0] === 1, windows }
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
  return { allowed, windows }
}
