import { createServer } from 'node:http'
import { describe, expect, it } from 'vitest'
import type { Gateway } from '../../src/app.js'
import type { UpgradeRecorder } from '../../src/history/report-store.js'
import type { Forwarder } from '../../src/http/proxy.js'
import { drainProxy, type Proxy } from '../../src/process/proxy-server.js'
import type { UsageRecorder } from '../../src/usage/recorder.js'
import type { LedgerRecorder } from '../../src/usage/ledger-recorder.js'
import type { MonthlyNotices } from '../../src/usage/notices.js'
import type { Core } from '../../src/process/core.js'
import type { ShapeRecorder } from '../../src/tuning/recorder.js'
import { FakeClock } from '../helpers/clock.js'

// SPEC §1: SIGTERM drains and stops. Once every client connection is gone, an upstream pool
// that does not close (a call that still holds its connection) is closed by force after 2 s;
// the recorders still write out what they hold.

function proxyWith(
  forwarder: Forwarder,
  clock: FakeClock,
  stopped: string[],
  warned: unknown[] = [],
  lost = 0
): Proxy {
  const stop = (name: string) => async () => (stopped.push(name), name === 'usage' ? lost : 0)
  const recorder = { stop: stop('recorder') } as unknown as UpgradeRecorder
  const usage = { stop: stop('usage') } as unknown as UsageRecorder
  const ledger = { stop: stop('ledger') } as unknown as LedgerRecorder
  const shapes = { stop: stop('shapes') } as unknown as ShapeRecorder
  return {
    forwarder,
    clock,
    server: createServer(),
    connections: new Set(),
    gateway: { tunnels: new Set() } as unknown as Gateway,
    recorders: [
      { lost: 'upgrade_report', writer: recorder },
      { lost: 'usage_day_counts', writer: usage },
      { lost: 'team_monthly_calls', writer: ledger },
      { lost: 'tuning_evidence', writer: shapes },
    ],
    notices: { stop: () => void stopped.push('notices') } as unknown as MonthlyNotices,
    core: {
      logger: { warn: (...args: unknown[]) => warned.push(args) },
      holder: {
        current: { config: { store: { url: 'redis://:pw@127.0.0.1:6379', cluster: [] } } },
      },
    } as unknown as Core,
    reloadTls: () => {},
  }
}

const tick = () => new Promise((r) => setImmediate(r))

describe('drainProxy', () => {
  it('destroys an upstream pool that does not close within 2 s, then stops the recorders', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 25))
    const stopped: string[] = []
    let destroyed = false
    const forwarder: Forwarder = {
      forward: () => {},
      close: () => new Promise(() => {}), // a call holds its connection for good
      destroy: async () => void (destroyed = true),
    }
    let done = false
    void drainProxy(proxyWith(forwarder, clock, stopped)).then(() => (done = true))
    await tick()
    clock.advance(1_999)
    await tick()
    expect(destroyed).toBe(false)
    expect(done).toBe(false)
    clock.advance(1)
    for (let i = 0; i < 5 && !done; i++) await tick()
    expect(destroyed).toBe(true)
    expect(done).toBe(true)
    expect(stopped).toEqual(['notices', 'recorder', 'usage', 'ledger', 'shapes'])
  })

  it('leaves a pool that closes in time alone', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 25))
    const stopped: string[] = []
    let destroyed = false
    const forwarder: Forwarder = {
      forward: () => {},
      close: async () => {},
      destroy: async () => void (destroyed = true),
    }
    await drainProxy(proxyWith(forwarder, clock, stopped))
    expect(destroyed).toBe(false)
    expect(stopped).toEqual(['notices', 'recorder', 'usage', 'ledger', 'shapes'])
  })

  it('says how many calls the store did not take before the exit (issue #40 item 9), the password masked', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 25))
    const warned: unknown[][] = []
    const forwarder: Forwarder = {
      forward: () => {},
      close: async () => {},
      destroy: async () => {},
    }
    await drainProxy(proxyWith(forwarder, clock, [], warned as unknown[], 42))
    expect(warned.length).toBe(1)
    const [fields, msg] = warned[0] as [Record<string, unknown>, string]
    expect(fields).toMatchObject({ usage_day_counts: 42, team_monthly_calls: 0, upgrade_report: 0 })
    expect(String(fields.store)).not.toContain('pw')
    expect(msg).toMatch(/these calls are not in its counts/)
  })
})
