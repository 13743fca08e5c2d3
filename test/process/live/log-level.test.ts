import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { useLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'

// docs/operating.md: an operator who needs no access log runs LOG_LEVEL=warn, and an admitted
// call then writes no line (the line is 11–16 % of its CPU in the bench) while a refusal still
// writes its own (SPEC §7: refusals log at warn).

const U = '9b2c3d4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = `/api-gateway/api/v2/dtables/${U}/rows/`

const live = useLive((up) => testYaml(up.url, 'rate_limits: { base: 2/min }'), {
  env: { LOG_LEVEL: 'warn' },
})

describe('LOG_LEVEL=warn', () => {
  it('an admitted call writes no line; a refusal writes its line at warn', async () => {
    const answers = []
    for (let i = 1; i <= 3; i++)
      answers.push(await send(live.gw.port, { path: rows, headers: { 'x-request-id': `w-${i}` } }))
    expect(answers.map((a) => a.status)).toEqual([200, 200, 429])
    const refused = await live.gw.waitForLog((l) => l.request_id === 'w-3')
    expect(refused).toMatchObject({ level: 'warn', status: 429, outcome: 'rate_limited' })
    // Lines leave in order: an admitted call's line would stand before the refusal's.
    const ids = live.gw.logs.map((l) => l.request_id).filter((id) => id !== undefined)
    expect(ids).toEqual(['w-3'])
  })
})
