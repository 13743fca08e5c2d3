import { describe, expect, it } from 'vitest'
import { freePort } from '../../helpers/ports.js'
import { testYaml } from '../../helpers/gateway-process.js'
import { startLive, useLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'

describe('upstream failures', () => {
  const live = useLive((up) =>
    testYaml(up.url, 'upstream: { url: "' + up.url + '", timeout_ms: 300 }').replace(
      /^upstream:.*\n/m,
      ''
    )
  )

  it('answers 504 with a JSON error_msg when the headers do not come in time', async () => {
    live.up.handle(() => {}) // never answers
    try {
      const t0 = Date.now()
      const a = await send(live.gw.port, { path: '/api2/repos/' })
      expect(a.status).toBe(504)
      expect(JSON.parse(a.body).error_msg).toMatch(/300 ms/)
      expect(Date.now() - t0).toBeLessThan(5_000)
    } finally {
      live.up.handle(null)
    }
  })

  it('does not time out a slow upload whose answer comes quickly after it is sent', async () => {
    const { request } = await import('node:http')
    const answer = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          port: live.gw.port,
          host: '127.0.0.1',
          method: 'POST',
          path: '/seafhttp/upload',
          agent: false,
          headers: { 'transfer-encoding': 'chunked' },
        },
        (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode!))
        }
      )
      req.on('error', reject)
      let i = 0
      const tick = setInterval(() => {
        req.write('x'.repeat(100))
        if (++i === 8) {
          clearInterval(tick)
          req.end()
        }
      }, 100) // 800 ms of upload against a 300 ms timeout
    })
    expect(answer).toBe(200)
  })

  it('answers 502 when the upstream drops the connection before answering', async () => {
    live.up.handle((req) => req.socket.destroy())
    try {
      const a = await send(live.gw.port, { path: '/api2/repos/' })
      expect(a.status).toBe(502)
      expect(JSON.parse(a.body).error_msg).toEqual(expect.any(String))
    } finally {
      live.up.handle(null)
    }
  })
})

describe('an upstream that refuses connections', () => {
  it('answers 502 with a JSON error_msg', async () => {
    const port = await freePort()
    const gw = await startLive(testYaml(`http://127.0.0.1:${port}`))
    try {
      const a = await send(gw.port, { path: '/api2/repos/' })
      expect(a.status).toBe(502)
      expect(a.headers['content-type']).toContain('application/json')
      expect(JSON.parse(a.body).error_msg).toMatch(/could not be reached/)
    } finally {
      await gw.stop()
    }
  })
})
