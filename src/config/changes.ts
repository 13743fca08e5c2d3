import type { Cluster, Redis } from 'ioredis'
import type { TeamChange } from '../quota/teams.js'
import { keys } from '../limiter/keys.js'
import type { LiveOverride } from '../overrides/live.js'

/**
 * Where admin-API team changes live. With Redis they are shared by every instance: written
 * to the team's hash (whose `quota` field the limiter script reads on every call, so a raised
 * quota applies at once), listed in a set, and announced on a channel so each instance
 * re-reads the team's bases.
 */
export interface ChangeStore {
  /** Every team change, loaded at start and on reload. */
  loadTeams(): Promise<Map<string, TeamChange>>
  setTeam(team: string, o: TeamChange, quota: number): Promise<void>
  deleteTeam(team: string): Promise<void>
  /** SPEC §10: the overrides the admin API put or deleted, by name. */
  loadOverrides(): Promise<Map<string, LiveOverride>>
  setOverride(name: string, value: LiveOverride | null): Promise<void>
  /** Called when any instance changed a team or an override. */
  onChange(fn: () => void): void
  close(): Promise<void>
}

export class MemoryChangeStore implements ChangeStore {
  private readonly map = new Map<string, TeamChange>()
  private readonly limits = new Map<string, LiveOverride>()
  private listener: (() => void) | null = null
  async loadOverrides() {
    return new Map(this.limits)
  }
  async setOverride(name: string, value: LiveOverride | null) {
    if (value === null) this.limits.delete(name)
    else this.limits.set(name, value)
    this.listener?.()
  }
  async loadTeams() {
    return new Map(this.map)
  }
  async setTeam(team: string, o: TeamChange) {
    this.map.set(team, o)
    this.listener?.()
  }
  async deleteTeam(team: string) {
    this.map.delete(team)
    this.listener?.()
  }
  onChange(fn: () => void) {
    this.listener = fn
  }
  async close() {}
}

export class RedisChangeStore implements ChangeStore {
  private readonly listKey: string
  private readonly limitsKey: string
  private readonly channel: string
  private listener: (() => void) | null = null

  constructor(
    private readonly client: Redis | Cluster,
    private readonly subscriber: Redis | Cluster,
    private readonly prefix: string
  ) {
    this.listKey = prefix + keys.teamsChanged
    this.limitsKey = prefix + keys.overrides
    this.channel = prefix + keys.teamsChannel
    void this.subscriber.subscribe(this.channel).catch(() => {})
    this.subscriber.on('message', (ch: string) => {
      if (ch === this.channel) this.listener?.()
    })
  }

  async loadTeams(): Promise<Map<string, TeamChange>> {
    const out = new Map<string, TeamChange>()
    const ids = await this.client.smembers(this.listKey)
    for (const id of ids) {
      const h = await this.client.hgetall(this.prefix + keys.teamChange(id))
      if (Object.keys(h).length === 0) continue
      const o: TeamChange = {}
      if (h.plan) o.plan = h.plan
      if (h.users) o.users = Number(h.users)
      if (h.bases) o.bases = JSON.parse(h.bases) as string[]
      out.set(id, o)
    }
    return out
  }

  async setTeam(team: string, o: TeamChange, quota: number): Promise<void> {
    const fields: Record<string, string> = { quota: String(quota) }
    if (o.plan !== undefined) fields.plan = o.plan
    if (o.users !== undefined) fields.users = String(o.users)
    if (o.bases !== undefined) fields.bases = JSON.stringify(o.bases)
    const key = this.prefix + keys.teamChange(team)
    // One transaction on the team's own key (one slot); the list and the channel follow.
    await this.client.multi().del(key).hset(key, fields).exec()
    await this.client.sadd(this.listKey, team)
    await this.client.publish(this.channel, team)
  }

  async loadOverrides(): Promise<Map<string, LiveOverride>> {
    const h = await this.client.hgetall(this.limitsKey)
    const out = new Map<string, LiveOverride>()
    for (const [name, json] of Object.entries(h)) {
      try {
        out.set(name, JSON.parse(json) as LiveOverride)
      } catch {
        // Written by this code only; a broken value is skipped, never applied half.
      }
    }
    return out
  }

  /** One hash for every override (one slot on a Cluster); the channel tells the others. */
  async setOverride(name: string, value: LiveOverride | null): Promise<void> {
    if (value === null) await this.client.hdel(this.limitsKey, name)
    else await this.client.hset(this.limitsKey, name, JSON.stringify(value))
    await this.client.publish(this.channel, `override:${name}`)
  }

  async deleteTeam(team: string): Promise<void> {
    await this.client.del(this.prefix + keys.teamChange(team))
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
