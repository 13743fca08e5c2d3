import { writeFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { freePort } from '../helpers/ports.js'
import { startGateway, testYaml } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { useStubUpstream } from '../helpers/stub-upstream.js'

// Issue #12: what an operator sees first.

const up = useStubUpstream()

describe('operator signals', () => {
  it('no upstream: one clear warning at start, and calls get a 502 that says so', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`
    const gw = await startGateway(testYaml(dead))
    try {
      const warn = await gw.waitForLog(
        (l) => typeof l.msg === 'string' && l.msg.startsWith('the upstream does not answer'),
        5000
      )
      expect(warn.level).toBe('warn')
      expect(warn.error).toBe('ECONNREFUSED')
      const r = await send(gw.port, { path: '/api2/repos/' })
      expect(r.status).toBe(502)
      expect(JSON.parse(r.body).error_msg).toBe('the upstream could not be reached (ECONNREFUSED)')
      const line = await gw.waitForLog((l) => l.path === '/api2/repos/')
      expect(line).toMatchObject({ level: 'warn', outcome: 'upstream_error' })
    } finally {
      await gw.stop()
    }
  })

  it('a refused reload shows in the metrics and the log; the next good one says which keys changed', async () => {
    const gw = await startGateway(testYaml(up.url))
    try {
      writeFileSync(gw.configFile, testYaml(up.url, 'rate_limits: { base: 5/mn }'))
      gw.proc.kill('SIGHUP')
      await gw.waitForLog((l) => l.msg === 'configuration refused; the running one stays')
      let metrics = (await send(gw.adminPort, { path: '/metrics' })).body
      expect(metrics).toContain('basegate_config_last_reload_successful 0')
      expect(metrics).toContain('basegate_config_reloads_total{result="refused"} 1')
      expect(metrics).toMatch(/basegate_build_info\{version="\d+\.\d+\.\d+",node="v\d+/)
      expect(metrics).toContain('process_cpu_user_seconds_total')
      writeFileSync(gw.configFile, testYaml(up.url, 'rate_limits: { base: 5/min }\nmode: dry-run'))
      gw.proc.kill('SIGHUP')
      const ok = await gw.waitForLog((l) => l.msg === 'configuration reloaded')
      // Issue #25: each changed setting by its name in the file, with its old and new value.
      expect(ok.changes).toEqual(
        expect.arrayContaining([
          { setting: 'rate_limits.base', old: ['500/min'], new: ['5/min'] },
          { setting: 'mode', old: 'enforce', new: 'dry-run' },
        ])
      )
      metrics = (await send(gw.adminPort, { path: '/metrics' })).body
      expect(metrics).toContain('basegate_config_last_reload_successful 1')
    } finally {
      await gw.stop()
    }
  })
})
