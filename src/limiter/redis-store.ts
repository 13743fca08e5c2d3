import { readFileSync } from 'node:fs'
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
}

/**
 * Counters in Redis: one EVALSHA per request for all its windows (ioredis defineCommand sends
 * EVALSHA and falls back to EVAL once after a restart flushed the script cache).
 */
export class RedisStore implements LimiterStore {
  private readonly client: ScriptClient

  constructor(client: Redis | Cluster, private readonly opts: RedisStoreOptions) {
    client.defineCommand('basegateConsume', { lua: SCRIPT })
    this.client = client as ScriptClient
  }

  consume(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    return this.run(charges, nowMs, false)
  }

  peek(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    return this.run(charges, nowMs, true)
  }

  private async run(charges: readonly Charge[], nowMs: number, peek: boolean): Promise<Decision> {
    const n = charges.length
    if (n === 0) return ADMIT_NOTHING_TO_CHECK
    const prefix = this.opts.prefix
    const keys: string[] = new Array(n)
    const argv: (string | number)[] = [nowMs, 1, peek ? 1 : 0]
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
