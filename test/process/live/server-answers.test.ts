import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { useLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'

// Issue #34 item 12, served in the test's process (issue #48): what the server answered is
// counted by status code, and a refusal by a named rule names it.

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

describe('what the server answered, counted and logged (issue #34 item 12)', () => {
  const live = useLive(
    (up) =>
      testYaml(
        up.url,
        `rate_limits:
  base: 100/min
  rules:
    - { name: list-rows, method: [GET], path: "/api-gateway/api/v2/dtables/{base_uuid}/rows/", limits: 1/min }`
      ),
    {
      upstream: (up) =>
        up.handle((req, res) => {
          req.resume()
          res.writeHead(req.url?.includes('/fail/') ? 500 : 200).end('{}')
        }),
    }
  )

  it('/metrics counts answers by status code: an upstream 500 shows as 500, not only as forwarded', async () => {
    await send(live.gw.port, { path: `/api-gateway/api/v2/dtables/${U}/fail/` })
    await send(live.gw.port, { path: `/api-gateway/api/v2/dtables/${U}/metadata/` })
    const text = await (await fetch(`${live.gw.adminUrl}/metrics`)).text()
    expect(text).toMatch(/^basegate_responses_total\{class="base",code="500"\} 1$/m)
    expect(text).toMatch(/^basegate_responses_total\{class="base",code="200"\} 1$/m)
  })

  it('a refusal by a named rule names the rule in its log line', async () => {
    const path = `/api-gateway/api/v2/dtables/${U}/rows/`
    expect((await send(live.gw.port, { path })).status).toBe(200)
    const r = await send(live.gw.port, { path, headers: { 'x-request-id': 'rule-refusal-1' } })
    expect(r.status).toBe(429)
    const line = await live.gw.waitForLog((l) => l.request_id === 'rule-refusal-1')
    expect(line).toMatchObject({ status: 429, policy: 'list-rows', level: 'warn' })
  })
})
