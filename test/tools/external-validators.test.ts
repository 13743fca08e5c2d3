import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

// The deploy kit checked by the tools its users run: systemd-analyze and promtool. They are not
// part of `npm test` (which must pass with only Node and a redis-server); `.ci/tools` installs
// them and runs this file (`npx vitest run --config vitest.tools.config.ts`).

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url))

describe('systemd unit', () => {
  it('passes systemd-analyze verify', () => {
    expect(
      spawnSync('systemd-analyze', ['--version']).status,
      'systemd-analyze (installed by .ci/tools)'
    ).toBe(0)
    const r = spawnSync('systemd-analyze', ['verify', root('deploy/systemd/basegate.service')], {
      encoding: 'utf8',
    })
    // A machine without node at /usr/bin/node may say so; nothing else may be reported.
    expect(
      r.stderr
        .split('\n')
        .filter(
          (l) => l.includes('basegate.service') && !/node.*(not executable|No such file)/.test(l)
        )
    ).toEqual([])
  })

  it('systemd-analyze security rates the unit at 3.0 or under', () => {
    const r = spawnSync(
      'systemd-analyze',
      ['security', '--offline=true', root('deploy/systemd/basegate.service')],
      { encoding: 'utf8' }
    )
    const m = /Overall exposure level for basegate\.service: ([\d.]+)/.exec(r.stdout + r.stderr)
    expect(m, r.stdout + r.stderr).not.toBeNull()
    expect(Number(m![1])).toBeLessThanOrEqual(3.0)
  })
})

describe('Prometheus alert rules', () => {
  it('pass promtool check rules', () => {
    const r = spawnSync('promtool', ['check', 'rules', root('deploy/prometheus/alerts.yml')], {
      encoding: 'utf8',
    })
    expect(r.status, `promtool (installed by .ci/tools): ${r.stdout}${r.stderr}`).toBe(0)
  })

  it('fire as issue #41 asks: a third of calls answered 502 fires BasegateUpstreamErrors; two instances reporting one used-up team give one alert', () => {
    const r = spawnSync(
      'promtool',
      ['test', 'rules', root('test/tools/promtool/alerts.test.yml')],
      {
        encoding: 'utf8',
      }
    )
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0)
    expect(r.stdout).toContain('SUCCESS')
  })
})
