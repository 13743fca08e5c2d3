import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/load.js'
import { compileSnapshot } from '../../src/http/snapshot.js'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { RedisStore } from '../../src/limiter/redis-store.js'
import type { LimiterStore } from '../../src/types.js'
import { useRedis } from '../helpers/redis.js'
import { systemClock } from '../../src/clock.js'

// Issue #11, finding 4: moving a base into or out of a team (PUT/DELETE /v1/teams, or a file
// reload) must not restart its rate windows: the rate keys never depend on the team.

const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const db = useRedis()

function snapshots() {
  const base = `rate_limits: { base: 3/min }\nmonthly: { enabled: true, teams: [ { id: acme, plan: plus, bases: [] } ] }`
  const r = parseConfig(base, {})
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  const alone = compileSnapshot(r.config)
  const inTeam = compileSnapshot(r.config, new Map([['acme', { bases: [A.replace(/-/g, '')] }]]))
  return { alone, inTeam }
}

async function moveKeepsCounts(store: LimiterStore): Promise<boolean[]> {
  const { alone, inTeam } = snapshots()
  const path = `/api-gateway/api/v2/dtables/${A}/rows/`
  const t = Date.now()
  const out: boolean[] = []
  for (let i = 0; i < 3; i++)
    out.push(
      (await store.consume(alone.classifier.classify('GET', path, '1.1.1.1', t).charges, t)).allowed
    )
  // Moved into the team: the month is charged too, but the minute window is the same one.
  const moved = inTeam.classifier.classify('GET', path, '1.1.1.1', t).charges
  expect(moved.some((c) => c.kind === 'monthly')).toBe(true)
  out.push((await store.consume(moved, t)).allowed)
  // And out again.
  out.push(
    (await store.consume(alone.classifier.classify('GET', path, '1.1.1.1', t).charges, t)).allowed
  )
  return out
}

describe('a team change keeps the rate windows (issue #11, finding 4)', () => {
  it('memory store', async () => {
    expect(await moveKeepsCounts(new MemoryStore())).toEqual([true, true, true, false, false])
  })
  it('Redis store', async () => {
    expect(
      await moveKeepsCounts(
        new RedisStore(db.client(), { clock: systemClock, prefix: `${db.redis.prefix}tm:` })
      )
    ).toEqual([true, true, true, false, false])
  })
})
