import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { compileClassifier } from '../../src/http/classify.js'
import { parseConfig } from '../../src/config/load.js'
import { RedisStore } from '../../src/limiter/redis-store.js'
import { useRedis } from '../helpers/redis.js'

// Issue #14: the window layout changed (a running total). During a rolling upgrade old and new
// instances share one Redis: each must read only keys of its own layout, never misread the
// other's. The old instance is played by the previous script (layout 1, kept as a fixture),
// called as the previous release called it, on the keys the previous release built.

const db = useRedis()
const OLD_SCRIPT = readFileSync(
  new URL('../fixtures/lua/sliding-window-v1.lua', import.meta.url),
  'utf8'
)
const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

describe('a rolling upgrade of the window layout (issue #14)', () => {
  it('old and new instances on one Redis use different keys and neither misreads the other', async () => {
    const client = db.client()
    const prefix = `${db.redis.prefix}roll:`
    const r = parseConfig('rate_limits: { base: 3/min }', {})
    if (!r.ok) throw new Error('config')
    const charges = compileClassifier(r.config).classify(
      'GET',
      `/api-gateway/api/v2/dtables/${U}/rows/`,
      '1.1.1.1',
      Date.now()
    ).charges
    const newKey = prefix + charges[0]!.key
    // What the previous release called the same window: no layout suffix.
    const oldKey = newKey.replace(/:w\d+$/, '')
    expect(oldKey).not.toBe(newKey)

    const oldCall = async () => {
      const raw = (await client.eval(
        OLD_SCRIPT,
        1,
        oldKey,
        Date.now(),
        1,
        0,
        3,
        60_000,
        0,
        0
      )) as number[]
      return raw[0] === 1
    }
    const store = new RedisStore(client, { prefix })
    const newCall = async () => (await store.consume(charges, Date.now())).allowed

    // Interleaved: each layout counts its own calls and never errors on the other's fields.
    const seen: boolean[] = []
    for (let i = 0; i < 4; i++) {
      seen.push(await oldCall())
      seen.push(await newCall())
    }
    expect(seen).toEqual([true, true, true, true, true, true, false, false])
    expect(Object.keys(await client.hgetall(oldKey)).every((f) => /^\d+$/.test(f))).toBe(true)
    expect(await client.hget(newKey, 't')).toBe('3')
  })
})
