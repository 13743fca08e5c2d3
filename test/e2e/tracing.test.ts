import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { freePort } from '../helpers/ports.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #25: OpenTelemetry traces to an OTLP/HTTP receiver (a stub that records the spans).

interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  attributes: { key: string; value: Record<string, unknown> }[]
}

async function startReceiver() {
  const spans: OtlpSpan[] = []
  const server: Server = createServer((req, res) => {
    let body = ''
    req.on('data', (d) => (body += d))
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const doc = JSON.parse(body) as {
          resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[]
        }
        for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans)
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{}')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, server }
}

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes.find((a) => a.key === key)?.value
  return v === undefined ? undefined : Object.values(v)[0]
}

const TOKEN_PATH = '/api/v2.1/external-link-tokens/0123456789abcdef0123456789abcdef/'
const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const CLIENT_SPAN = '00f067aa0ba902b7'

describe('OpenTelemetry traces', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  let rx: Awaited<ReturnType<typeof startReceiver>>
  beforeAll(async () => {
    up = await startStubUpstream()
    rx = await startReceiver()
    gw = await startGateway(testYaml(up.url, 'rate_limits: { account: 100/min }'), {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: rx.url, OTEL_BSP_SCHEDULE_DELAY: '100' },
    })
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
    rx?.server.close()
  })

  it('one span per request, children for the store and the upstream call, traceparent sent upstream', async () => {
    const a = await send(gw.port, {
      path: TOKEN_PATH,
      headers: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` },
    })
    expect(a.status).toBe(200)
    const deadline = Date.now() + 5000
    while (rx.spans.filter((s) => s.traceId === CLIENT_TRACE).length < 3 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50))
    const spans = rx.spans.filter((s) => s.traceId === CLIENT_TRACE)
    const request = spans.find((s) => s.parentSpanId === CLIENT_SPAN)!
    expect(request).toBeDefined()
    expect(attr(request, 'basegate.class')).toBe('account')
    expect(attr(request, 'basegate.outcome')).toBe('forwarded')
    expect(Number(attr(request, 'http.response.status_code'))).toBe(200)
    // SPEC §6: the token in the path never reaches a span.
    expect(attr(request, 'url.path')).toBe('/api/v2.1/external-link-tokens/0123…/')
    expect(JSON.stringify(rx.spans)).not.toContain('0123456789abcdef0123456789abcdef')
    const store = spans.find((s) => s.name === 'rate-limit store')!
    const upstream = spans.find((s) => s.name === 'upstream')!
    expect(store.parentSpanId).toBe(request.spanId)
    expect(upstream.parentSpanId).toBe(request.spanId)
    // The server saw the upstream span as its parent, in place of the client's.
    const seen = up.seen.at(-1)!
    expect(seen.headers.traceparent).toBe(`00-${CLIENT_TRACE}-${upstream.spanId}-01`)
  })

  it('an OTLP endpoint that is down never slows or fails a request', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`
    const g = await startGateway(testYaml(up.url), {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: dead, OTEL_BSP_SCHEDULE_DELAY: '50' },
    })
    try {
      const t0 = performance.now()
      for (let i = 0; i < 20; i++)
        expect((await send(g.port, { path: '/api2/repos/' })).status).toBe(200)
      expect(performance.now() - t0).toBeLessThan(2000)
    } finally {
      await g.stop()
    }
  })
})
