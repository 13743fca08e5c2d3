import { describe, expect, it } from 'vitest'
import { busiestWindow, hammer } from '../helpers/hammer.js'
import { useInstances } from '../helpers/instances.js'

// Issue #11 (finding 2): over-admission across instances. Three instances on one Redis, a
// base at 20/s, 150 calls in flight for a few seconds: every admission's time on the store's
// clock (the request line's store_time) is recorded, and no 1,000 ms window may hold more than
// 20 of them. With each instance bucketing on its own clock (the behaviour before the fix, which
// lives on only in test/helpers/caller-clock.ts) the same run admits more than the limit.

const LIMIT = 20

describe("three instances, one Redis: the bound holds on the store's clock (issue #11)", () => {
  const { gws } = useInstances({
    count: 3,
    yaml: (redis) =>
      `store: { url: "${redis.url}", prefix: "${redis.prefix}clock:", timeout_ms: 2000 }\nrate_limits: { base: ${LIMIT}/s }`,
    env: { LOG_LEVEL: 'info' },
  })

  it('no 1,000 ms of store time holds more than the limit, under 150 calls in flight', async () => {
    const times = await hammer(gws, 8, 150)
    expect(times.length).toBeGreaterThan(3 * LIMIT) // the run spanned several windows
    expect(busiestWindow(times, 1000)).toBeLessThanOrEqual(LIMIT)
  }, 40_000)
})
