import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  onePooledConnection,
  startGateway,
  type GatewayProcess,
} from '../helpers/gateway-process.js'
import { answerWithin, send } from '../helpers/http.js'
import { until } from '../helpers/until.js'
import { metricOf } from '../helpers/metrics.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// A client that leaves while its call waits for an upstream connection (all of
// upstream.max_connections busy) must not take that connection with it: before the fix the
// call was sent when a connection came free, its answer found the client gone, and the
// connection waited for a drain that never came, for good (undici never times out a paused
// body). Every later call then queued behind it, and SIGTERM never finished draining.

const SLOW = '/api2/repos/slow/'

describe('a client that leaves while its call waits for an upstream connection', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  beforeAll(async () => {
    up = await startStubUpstream()
    up.handle((req, res) => {
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ ok: true, url: req.url, pad: 'x'.repeat(64 * 1024) }))
      }
      if (req.url?.startsWith(SLOW)) setTimeout(answer, 600)
      else answer()
    })
    gw = await startGateway(onePooledConnection(up.url, ', timeout_ms: 2000'))
  })
  afterAll(async () => {
    await gw?.stop('SIGKILL')
    await up?.close()
  })

  it('does not keep the upstream connection: the next call is answered, and SIGTERM ends the process', async () => {
    // The one upstream connection is busy for 600 ms.
    const slow = send(gw.port, { path: SLOW })
    await until(
      'the slow call at the server',
      () => up.seen,
      (seen) => seen.some((x) => x.url === SLOW)
    )
    // This call queues behind it; its client leaves before a connection comes free.
    const gone = connect(gw.port, '127.0.0.1')
    await new Promise<void>((r) => gone.once('connect', () => r()))
    gone.write('GET /api2/repos/gone/ HTTP/1.1\r\nhost: x\r\n\r\n')
    await until(
      'the call waiting for its share of the pool',
      () => metricOf(gw.adminUrl, 'basegate_upstream_share_waiting'),
      (n) => n === 1
    )
    gone.destroy()
    expect((await slow).status).toBe(200)
    // The next call gets the connection (not the one the leaver left stuck).
    const next = await answerWithin(gw.port, '/api2/repos/next/', 4_000)
    expect(next?.status).toBe(200)
    // SIGTERM drains and exits 0 within the drain bound (10 s), not never.
    const code = await Promise.race([
      gw.stop('SIGTERM'),
      new Promise<string>((r) => setTimeout(() => r('still running'), 12_000)),
    ])
    expect(code).toBe(0)
  }, 25_000)
})
