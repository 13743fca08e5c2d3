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

  async consume(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    const n = charges.length
    if (n === 0) return ADMIT_NOTHING_TO_CHECK
    const args: (string | number)[] = new Array(n + 2 + 2 * n)
    for (let i = 0; i < n; i++) args[i] = this.opts.prefix + charges[i]!.key
    args[n] = nowMs
    args[n + 1] = 1
    for (let i = 0; i < n; i++) {
      args[n + 2 + 2 * i] = charges[i]!.limit
      args[n + 3 + 2 * i] = charges[i]!.windowMs
    }
    let raw: number[]
    try {
      raw = await this.client.basegateConsume(n, ...args)
    } catch (err) {
      throw new StoreError(`redis: ${(err as Error).message}`, { cause: err })
    }
    const windows = new Array(n)
    for (let i = 0; i < n; i++) {
      windows[i] = toWindowState(charges[i]!, raw[1 + 3 * i]!, raw[2 + 3 * i]!, raw[3 + 3 * i]!, nowMs)
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
