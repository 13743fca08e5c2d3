import type { Cluster, Redis } from 'ioredis'
import {
  CHECK,
  RedisStore,
  type CheckClock,
  type RedisStoreOptions,
} from '../../src/limiter/redis-store.js'

/**
 * A Redis store that buckets calls at the nowMs its caller passes, not at the store's TIME:
 * for tests that drive time by hand. Its own copy of check.lua reads that time from one more
 * argument after the windows' (the production script has no such argument). It is also the
 * behaviour before issue #11 (each instance on its own clock), which over-admits across
 * instances; production never runs it.
 */
const CALLER_CHECK = swap(
  swap(CHECK, 'local now = storeNow\n', 'local now = tonumber(ARGV[#ARGV])\n'),
  'local n = (#A - FIRST + 1) / PER_WINDOW\n',
  'local n = (#A - FIRST) / PER_WINDOW\n'
)
const CALLER_CLOCK: CheckClock = {
  command: 'basegateCheckCallerClock',
  lua: CALLER_CHECK,
  args: (nowMs) => [nowMs],
  deadlines: false,
}

function swap(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`check.lua no longer has ${JSON.stringify(from)}`)
  return text.replace(from, to)
}

export class CallerClockRedisStore extends RedisStore {
  constructor(client: Redis | Cluster, opts: RedisStoreOptions) {
    super(client, opts)
  }

  protected override checkClock(): CheckClock {
    return CALLER_CLOCK
  }
}
