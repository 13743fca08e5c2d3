import { writeFileSync } from 'node:fs'
import { beforeAll, describe, expect, it } from 'vitest'
import { runOnce, startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { until } from '../helpers/until.js'
import { useInstances } from '../helpers/instances.js'
import { FAST, serverOf, useServerBehindGateway } from '../helpers/server-version.js'

// SPEC §8 where it needs processes (a reload by signal, two instances sharing the report, the
// CLI); the rest is test/process/live/history.test.ts's. A stub upstream that answers /server-info/ as a server of
// a chosen version (or not at all).

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const oldRows = `/dtable-server/api/v1/dtables/${U}/rows/`

describe('a reload switches it all live', () => {
  const s = useServerBehindGateway(startGateway, { current: '6.2' })

  it('a reload to history.removed: pass forwards removed endpoints; server.version fixed beats auto', async () => {
    expect((await send(s.gw.port, { path: oldRows })).status).toBe(410)
    writeFileSync(s.gw.configFile, testYaml(s.up.url, 'history: { removed: pass }'))
    s.gw.proc.kill('SIGHUP')
    await s.gw.waitForLog((l) => l.msg === 'configuration reloaded')
    expect((await send(s.gw.port, { path: oldRows })).status).toBe(200)
    writeFileSync(s.gw.configFile, testYaml(s.up.url, 'server: { version: "5.2" }'))
    s.gw.proc.kill('SIGHUP')
    await s.gw.waitForLog(
      (l) =>
        l.msg === 'configuration reloaded' &&
        s.gw.logs.filter((x) => x.msg === 'configuration reloaded').length >= 2
    )
    const r = await send(s.gw.port, { path: oldRows })
    expect(r.status).toBe(200)
    expect(r.headers.deprecation).toBeDefined()
  })
})

describe('the upgrade report, shared by two instances on one Redis', () => {
  const shared = useInstances({
    count: 2,
    yaml: (redis) =>
      `store: { url: "${redis.url}", prefix: "${redis.prefix}hist:" }\nusage: { keep_after: 0 }`,
    env: FAST,
    upstream: (up) => serverOf(up, { current: '5.1' }),
  })
  const gws = shared.gws
  beforeAll(async () => {
    await Promise.all(gws.map((g) => g.waitForLog((l) => l.msg === 'server version known')))
  })

  it('counts per entry and key across instances; /v1/upgrade-report and the CLI agree', async () => {
    const [a, b] = gws as [GatewayProcess, GatewayProcess]
    for (let i = 0; i < 3; i++) await send(a.port, { path: oldRows })
    for (let i = 0; i < 2; i++) await send(b.port, { path: oldRows, headers: {} })
    await send(b.port, {
      path: `/api/v1/dtables/${U}/archive-view/`,
      method: 'POST',
      body: '{"sql":"select * from t"}',
      headers: { 'content-type': 'application/json' },
    })
    await send(b.port, {
      path: `/api/v1/dtables/${U}/archive-view/`,
      method: 'POST',
      body: '{"view_name":"V"}',
      headers: { 'content-type': 'application/json' },
    })
    // b's batches are written on its interval (its calls may span two); a's when its report is
    // asked for: waited for until both of b's entries are in.
    const calls = (r: { entries: { id: string; calls: number }[] }, id: string) =>
      r.entries.find((e) => e.id === id)?.calls
    const r = await until(
      "b's batches",
      async () => JSON.parse((await send(a.adminPort, { path: '/v1/upgrade-report?to=6.2' })).body),
      (r) => calls(r, 'dtable-server-removed') === 5 && calls(r, 'archive-view-raw-sql') === 1
    )
    expect(r.from).toBe('5.1')
    expect(r.to).toBe('6.2')
    const byId = Object.fromEntries(r.entries.map((e: { id: string }) => [e.id, e]))
    expect(byId['dtable-server-removed']).toMatchObject({
      version: '5.3',
      date: '2025-06-16',
      calls: 5,
      top_keys: [{ key: `base:${U}`, calls: 5 }],
    })
    expect(byId['archive-view-raw-sql']).toMatchObject({ version: '6.0', calls: 1 })
    expect(byId['external-link-access-token-removed']).toMatchObject({ calls: 0, last_seen: null })
    expect(r.entries[0].id).toBe('dtable-server-removed') // busiest first
    expect(r.entries.some((e: { id: string }) => e.id === 'share-link-access-token-removed')).toBe(
      false
    ) // 4.0: before 5.1

    const cli = await runOnce(['upgrade-report', '--to', '6.2', '--config', a.configFile])
    expect(cli.code).toBe(0)
    expect(cli.stdout).toContain('Upgrade 5.1 → 6.2')
    expect(cli.stdout).toMatch(/5\.3\s+2025-06-16\s+dtable-server-removed\s+5\s/)
    expect(cli.stdout).toContain('→ use /api-gateway/api/v2/dtables/{base_uuid}/...')
  })

  it('the CLI reads the shared store when no instance answers', async () => {
    const { redis, up } = shared
    const cfg = testYaml(
      up.url,
      `admin: { host: 127.0.0.1, port: 1 }\nstore: { url: "${redis.url}", prefix: "${redis.prefix}hist:" }\nserver: { version: "5.1" }`
    )
    const file = `${gws[0]!.configFile}.cli.yaml`
    writeFileSync(file, cfg.replace('admin: { host: 127.0.0.1, port: 0 }\n', ''))
    const cli = await runOnce(['upgrade-report', '--to', '6.0', '--config', file])
    expect(cli.stderr).toBe('')
    expect(cli.stdout).toMatch(/dtable-server-removed\s+5\s/)
    expect(cli.stdout).not.toContain('external-link-access-token-removed')
  })
})
