import type { Cluster, Redis } from 'ioredis'
import { RedisStore, type RedisStoreOptions } from '../../src/limiter/redis-store.js'

/**
 * A Redis store that buckets calls at the nowMs its caller passes, not at the store's TIME:
 * for tests that drive time by hand. It is also the behaviour before issue #11 (each instance
 * on its own clock), which over-admits across instances; production never runs it.
 */
export class CallerClockRedisStore extends RedisStore {
  constructor(client: Redis | Cluster, opts: RedisStoreOptions) {
    super(client, opts)
  }

  protected override bucketTimeArg(nowMs: number): number {
    return nowMs
  }
}
