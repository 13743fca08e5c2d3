import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { startLive } from '../../helpers/live.js'
import { rowsPath, send } from '../../helpers/http.js'
import { redisPid, startRedis, useRedis } from '../../helpers/redis.js'
import { useStubUpstream } from '../../helpers/stub-upstream.js'

const up = useStubUpstream()

const uuid = (n: number) => `${n.toString(16).padStart(8, '0')}-2222-4c59-9a51-3e2d7c8b9a10`
const admin = (port: number, path: string) => send(port, { path })

describe('store.on_error: open', () => {
  const db = useRedis({ own: true })

  it('limits alone while Redis is down, says so once, tells /readyz, and resumes shared counting', async () => {
    const gw = await startLive(
      testYaml(
        up.url,
        `store: { url: "${db.redis.url}", timeout_ms: 100, on_error: open }\nrate_limits: { base: 3/min }`
      )
    )
    try {
      expect((await send(gw.port, { path: rowsPath(uuid(1)) })).status).toBe(200)
      expect((await admin(gw.adminPort, '/readyz')).status).toBe(200)
      await db.redis.kill()
      // Served from the local limiter: the same limit, counted in this process.
      const statuses: number[] = []
      for (let i = 0; i < 5; i++)
        statuses.push((await send(gw.port, { path: rowsPath(uuid(2)) })).status)
      expect(statuses).toEqual([200, 200, 200, 429, 429])
      // SPEC §7: under on_error: open the instance can still serve (it limits alone).
      const ready = await admin(gw.adminPort, '/readyz')
      expect(ready.status).toBe(200)
      expect(JSON.parse(ready.body)).toMatchObject({ store: 'down' })
      const metrics = (await admin(gw.adminPort, '/metrics')).body
      expect(
        Number(/basegate_store_fallback_decisions_total (\d+)/.exec(metrics)![1])
      ).toBeGreaterThanOrEqual(5)
      expect(Number(/basegate_store_errors_total (\d+)/.exec(metrics)![1])).toBeGreaterThanOrEqual(
        1
      )
      expect(gw.logs.filter((l) => l.msg === 'store unavailable')).toHaveLength(1)

      await db.redis.restart()
      // The outage ends at the first store call that succeeds after the client reconnects.
      for (let i = 0; i < 50 && !gw.logs.some((l) => l.msg === 'store available again'); i++) {
        await send(gw.port, { path: rowsPath(uuid(3)) })
        await new Promise((r) => setTimeout(r, 200))
      }
      expect(gw.logs.some((l) => l.msg === 'store available again')).toBe(true)
      expect((await admin(gw.adminPort, '/readyz')).status).toBe(200)
      // Shared again: a second instance sees this one's calls.
      const other = await startLive(
        testYaml(up.url, `store: { url: "${db.redis.url}" }\nrate_limits: { base: 3/min }`)
      )
      try {
        await send(gw.port, { path: rowsPath(uuid(4)) })
        const r = await send(other.port, { path: rowsPath(uuid(4)) })
        expect(r.headers['x-ratelimit-remaining']).toBe('1')
      } finally {
        await other.stop()
      }
    } finally {
      await gw.stop()
    }
  }, 60_000)

  it('never waits on a hung Redis longer than store.timeout_ms', async () => {
    const gw = await startLive(
      testYaml(
        up.url,
        `store: { url: "${db.redis.url}", timeout_ms: 100, on_error: open }\nrate_limits: { base: 100/min }`
      )
    )
    const pid = redisPid(db.redis.port)
    try {
      await send(gw.port, { path: rowsPath(uuid(5)) })
      process.kill(pid, 'SIGSTOP')
      const times: number[] = []
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now()
        expect((await send(gw.port, { path: rowsPath(uuid(5)) })).status).toBe(200)
        times.push(performance.now() - t0)
      }
      // 100 ms store timeout, plus the proxying, on a shared machine.
      expect(Math.max(...times)).toBeLessThan(1000)
    } finally {
      process.kill(pid, 'SIGCONT')
      await gw.stop()
    }
  }, 30_000)
})

describe('store.on_error: closed', () => {
  it('answers 503 with retry-after: 1 and a JSON error_msg while Redis is down', async () => {
    const redis = await startRedis({ own: true })
    const gw = await startLive(
      testYaml(up.url, `store: { url: "${redis.url}", timeout_ms: 100, on_error: closed }`)
    )
    try {
      expect((await send(gw.port, { path: rowsPath(uuid(9)) })).status).toBe(200)
      await redis.kill()
      const r = await send(gw.port, { path: rowsPath(uuid(9)) })
      expect(r.status).toBe(503)
      expect(r.headers['retry-after']).toBe('1')
      expect(JSON.parse(r.body).error_msg).toEqual(expect.any(String))
      // Exempt and unlimited paths need no store and are still served.
      expect((await send(gw.port, { path: '/api2/ping/' })).status).toBe(200)
    } finally {
      await gw.stop()
      await redis.stop()
    }
  }, 30_000)
})
