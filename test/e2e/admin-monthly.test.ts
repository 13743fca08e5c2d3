import { writeFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runOnce, startGateway, testYaml, writeConfig } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// What of the admin API and the monthly quotas needs a process of its own: the check of the
// file at start, the file watch and the summary timer (serveUntilStopped's, not the core's).
// The rest is served in the test's process: test/process/live/admin-monthly.test.ts.

const LONE = 'cccc0000-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`

let up: StubUpstream

beforeAll(async () => {
  up = await startStubUpstream()
})
afterAll(async () => {
  await up?.close()
})

describe('admin API (SPEC §7)', () => {
  it('a public admin host without a token is a config error', async () => {
    const r = await runOnce(['--config', writeConfig('admin: { host: 0.0.0.0 }')])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('admin.host')
  })
})

describe('live reload (SPEC §2)', () => {
  it('reloads when the file changes', async () => {
    const g = await startGateway(testYaml(up.url, 'rate_limits: { account: 5/min }\nheaders: all'))
    try {
      writeFileSync(g.configFile, testYaml(up.url, 'rate_limits: { account: 7/min }\nheaders: all'))
      await g.waitForLog(
        (l) => l.msg === 'configuration reloaded' && l.source === 'file change',
        5000
      )
      expect((await send(g.port, { path: '/api2/repos/' })).headers['x-ratelimit-limit']).toBe('7')
    } finally {
      await g.stop()
    }
  })
})

describe('the summary line', () => {
  it('lists the busiest keys and the teams past their quota, at warn', async () => {
    const g = await startGateway(
      testYaml(
        up.url,
        `monthly:
  enabled: true
  plans: { two: { calls: 2 } }
  teams: [ { id: t2, plan: two, bases: [${LONE}] } ]`
      ),
      { env: { BASEGATE_SUMMARY_MS: '300' } }
    )
    try {
      for (let i = 0; i < 3; i++) await send(g.port, { path: rows(LONE) })
      const line = await g.waitForLog(
        (l) =>
          typeof l.msg === 'string' &&
          l.msg.startsWith('usage summary') &&
          (l.requests as number) > 0
      )
      expect(line.level).toBe('warn')
      expect(line.busiest).toEqual([{ key: `base:${LONE}`, calls: 3 }])
      expect(line.teams_over_100).toEqual([{ team: 't2', used: 2, quota: 2, percent: 100 }])
    } finally {
      await g.stop()
    }
  })
})
