import type { Cluster, Redis } from 'ioredis'
import type { TeamOverride } from './teams.js'
import { keys } from '../limiter/keys.js'

/**
 * Where admin-API team changes live. With Redis they are shared by every instance: written
 * to the team's hash (whose `quota` field the limiter script reads on every call, so a raised
 * quota applies at once), listed in a set, and announced on a channel so each instance
 * re-reads the team's bases.
 */
export interface OverrideStore {
  /** Every override, loaded at start and on reload. */
  load(): Promise<Map<string, TeamOverride>>
  set(team: string, o: TeamOverride, quota: number): Promise<void>
  delete(team: string): Promise<void>
  /** Called when any instance changed a team. */
  onChange(fn: () => void): void
  close(): Promise<void>
}

export class MemoryOverrideStore implements OverrideStore {
  private readonly map = new Map<string, TeamOverride>()
  private listener: (() => void) | null = null
  async load() {
    return new Map(this.map)
  }
  async set(team: string, o: TeamOverride) {
    this.map.set(team, o)
    this.listener?.()
  }
  async delete(team: string) {
    this.map.delete(team)
    this.listener?.()
  }
  onChange(fn: () => void) {
    this.listener = fn
  }
  async close() {}
}

export class RedisOverrideStore implements OverrideStore {
  private readonly listKey: string
  private readonly channel: string
  private listener: (() => void) | null = null

  constructor(
    private readonly client: Redis | Cluster,
    private readonly subscriber: Redis | Cluster,
    private readonly prefix: string
  ) {
    this.listKey = `${prefix}teams:changed`
    this.channel = `${prefix}teams`
    void this.subscriber.subscribe(this.channel).catch(() => {})
    this.subscriber.on('message', (ch: string) => {
      if (ch === this.channel) this.listener?.()
    })
  }

  async load(): Promise<Map<string, TeamOverride>> {
    const out = new Map<string, TeamOverride>()
    const ids = await this.client.smembers(this.listKey)
    for (const id of ids) {
      const h = await this.client.hgetall(this.prefix + keys.teamOverride(id))
      if (Object.keys(h).length === 0) continue
      const o: TeamOverride = {}
      if (h.plan) o.plan = h.plan
      if (h.users) o.users = Number(h.users)
      if (h.bases) o.bases = JSON.parse(h.bases) as string[]
      out.set(id, o)
    }
    return out
  }

  async set(team: string, o: TeamOverride, quota: number): Promise<void> {
    const fields: Record<string, string> = { quota: String(quota) }
    if (o.plan !== undefined) fields.plan = o.plan
    if (o.users !== undefined) fields.users = String(o.users)
    if (o.bases !== undefined) fields.bases = JSON.stringify(o.bases)
    const key = this.prefix + keys.teamOverride(team)
    // One transaction on the team's own key (one slot); the list and the channel follow.
    await this.client.multi().del(key).hset(key, fields).exec()
    await this.client.sadd(this.listKey, team)
    await this.client.publish(this.channel, team)
  }

  async delete(team: string): Promise<void> {
    await this.client.del(this.prefix + keys.teamOverride(team))
    await this.client.srem(this.listKey, team)
    await this.client.publish(this.channel, team)
  }

  onChange(fn: () => void): void {
    this.listener = fn
  }

  async close(): Promise<void> {
    this.subscriber.disconnect()
  }
}
