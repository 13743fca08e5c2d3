import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { dayBounds } from '../../src/quota/month.js'
import { RedisShapeStore, type ShapeBatch } from '../../src/tuning/shape-store.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

// SPEC §11 "Reading a candidate" (issue #46 item 10): a 35-day report over 100,000 keys answers
// within 10 s and holds at most 64 MB while it works. 100,000 kept keys, each with a day of
// calls somewhere in the last 35, in a real Redis; the report runs in a child with --trace-gc,
// and its live heap is read after each full collection (what survives one is what it holds).
// Run by .ci/load (vitest.heavy.config.ts): a claim about time belongs there, not in npm test.

const KEYS = 100_000
const CHILD = fileURLToPath(new URL('./tune-report-child.mjs', import.meta.url))

describe('a 35-day tuning report over 100,000 keys (SPEC §11)', () => {
  let redis: TestRedis
  const prefix = () => `${redis.prefix}tune:`
  beforeAll(async () => {
    redis = await startRedis()
    const client = new Redis(redis.url)
    const store = new RedisShapeStore(client, prefix())
    const now = Date.now()
    let seq = 0
    for (let start = 0; start < KEYS; start += 5000) {
      const batch: ShapeBatch = new Map()
      for (let i = start; i < Math.min(KEYS, start + 5000); i++) {
        const d = dayBounds(now - (i % 35) * 86_400_000, 'UTC')
        let e = batch.get(d.id)
        if (e === undefined) batch.set(d.id, (e = { dayEndMs: d.endMs, series: new Map() }))
        const bins = new Map([
          [i % 720, 5 + (i % 50)],
          [(i + 7) % 720, 3],
        ])
        e.series.set(
          `base:${i.toString(16).padStart(32, '0')}\tGET /api-gateway/api/v2/dtables/<u>/rows/`,
          {
            total: 8 + (i % 50),
            refusedRate: 0,
            refusedMonthly: 0,
            hours: new Map([[i % 24, bins]]),
          }
        )
      }
      await store.add(batch, { instance: 'fill', seq: ++seq })
    }
    client.disconnect()
  }, 120_000)
  afterAll(async () => {
    await redis?.stop()
  })

  it('answers within 10 s, its live heap at most 64 MB above where it began', async () => {
    const child = spawn(process.execPath, ['--trace-gc', CHILD, redis.url, prefix()], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    await new Promise((r) => child.once('exit', r))
    // "Mark-Compact 89.9 (120.1) -> 57.9 (110.0) MB": the heap after a full collection.
    const after = [...out.matchAll(/Mark-Compact[^\n]*?-> ([\d.]+) \(/g)].map((m) => Number(m[1]))
    const result = JSON.parse(out.split('\n').find((l) => l.startsWith('{'))!) as {
      ms: number
      series: number
      keys: number
    }
    const base = after[0] ?? 0
    const peak = Math.max(...after)
    console.log(
      `tuning report: ${result.series} key-days of ${result.keys} keys over 35 days in ${(result.ms / 1000).toFixed(2)} s; live heap ${base.toFixed(1)} → peak ${peak.toFixed(1)} MB over ${after.length} full collections`
    )
    expect(result.series).toBe(KEYS)
    expect(result.keys).toBe(KEYS)
    expect(result.ms).toBeLessThan(10_000)
    expect(peak - base).toBeLessThanOrEqual(64)
  }, 60_000)
})
