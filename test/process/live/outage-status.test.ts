import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { useLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'

// Issue #41 items 1 and 2: the server's own 5xx are an outcome of their own; a total outage is
// flagged within seconds, with since when, and its end says how long it lasted (page and log).

describe('a server outage as the operator watches it (issue #41)', () => {
  let down = false
  const live = useLive((up) => testYaml(up.url, ''), {
    upstream: (up) =>
      up.handle((req, res) => {
        req.resume()
        if (down)
          return void res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>502</h1>')
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      }),
  })

  const status = async () =>
    (await (await fetch(`${live.gw.adminUrl}/v1/status`)).json()) as {
      alerts: { kind: string; text: string; since_ms: number | null }[]
      recoveries: { kind: string; lasted_s: number }[]
      upstream: { state: string; since_ms: number | null }
      traffic: { series: Record<string, number[]> }
    }

  it('502s from the server: upstream_5xx in the metrics and the chart, flagged after 3 failed calls in a row with since when; the recovery says how long it lasted', async () => {
    for (let i = 0; i < 5; i++)
      expect((await send(live.gw.port, { path: '/api/v2.1/user/' })).status).toBe(200)
    expect((await status()).alerts).toEqual([])
    down = true
    const started = Date.now()
    for (let i = 0; i < 3; i++)
      expect((await send(live.gw.port, { path: '/api/v2.1/user/' })).status).toBe(502)
    // Three in a row are enough: no wait on a window of time (SPEC: within seconds).
    expect((await status()).upstream.state).toBe('failing')
    expect((await send(live.gw.port, { path: '/api/v2.1/user/' })).status).toBe(502)
    const s = await status()
    expect(s.upstream.state).toBe('failing')
    expect(s.alerts).toEqual([expect.objectContaining({ kind: 'server' })])
    expect(s.alerts[0]!.since_ms).toBeGreaterThanOrEqual(started)
    expect(s.traffic.series['account/upstream_5xx']!.reduce((a, b) => a + b, 0)).toBe(4)
    const metrics = await (await fetch(`${live.gw.adminUrl}/metrics`)).text()
    expect(metrics).toMatch(/basegate_requests_total\{class="account",outcome="upstream_5xx"\} 4/)
    const line = await live.gw.waitForLog((l) => l.msg === 'the server is failing (5xx, 502, 504)')
    expect(line.level).toBe('warn')
    // The scenario's own length: an episode of over a second, for lasted_s.
    await new Promise((r) => setTimeout(r, 1200))
    down = false
    for (let i = 0; i < 2; i++)
      expect((await send(live.gw.port, { path: '/api/v2.1/user/' })).status).toBe(200)
    const after = await status()
    expect(after.alerts).toEqual([])
    expect(after.recoveries).toEqual([expect.objectContaining({ kind: 'server' })])
    expect(after.recoveries[0]!.lasted_s).toBeGreaterThanOrEqual(1)
    const back = await live.gw.waitForLog((l) =>
      String(l.msg).startsWith('the server answers again after')
    )
    expect(Number(back.lasted_s)).toBeGreaterThanOrEqual(1)
  })
})
