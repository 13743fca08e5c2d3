import { allBases } from '../helpers/stores.js'
import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { createLogger } from '../../src/observe/log.js'
import { LedgerRecorder } from '../../src/usage/ledger-recorder.js'
import { MonthlyNotices } from '../../src/usage/notices.js'
import { UsageRecorder } from '../../src/usage/recorder.js'
import { MemoryUsageStore } from '../../src/usage/store.js'
import { FakeClock } from '../helpers/clock.js'
import { inProcess } from '../helpers/in-process.js'
import { Writable } from 'node:stream'

// SPEC §5 in process (issue #42): what a call adds to the usage over time, the ledger and the
// month's notices, through createGateway with the memory stores and the fake clock. The same
// promises across instances and a store that goes away: test/process/live/one-ledger.test.ts.

const ACME = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const SOLO = '11111111-0d3b-4c59-9a51-3e2d7c8b9a10'
const hex = (u: string) => u.replaceAll('-', '')
const rowsOf = (u: string) => `/api-gateway/api/v2/dtables/${u}/rows/`
const NOW = Date.parse('2026-11-23T10:00:00Z')

function accounted(monthly: string, upstreamStatus = 200) {
  const clock = new FakeClock(NOW)
  const store = new MemoryStore()
  const usageStore = new MemoryUsageStore()
  const notes: Record<string, unknown>[] = []
  const noticeLog = createLogger({
    level: 'info',
    destination: new Writable({
      write(c, _e, cb) {
        for (const l of String(c).split('\n')) if (l) notes.push(JSON.parse(l))
        cb()
      },
    }),
  })
  const opts = { instance: 'test', clock }
  const usage = new UsageRecorder(usageStore, { ...opts, timezone: () => 'UTC' })
  const ledger = new LedgerRecorder(store, opts)
  const notices = new MonthlyNotices(store, noticeLog, { token: 'test', clock })
  const g = inProcess(`charge: { server_errors: false }\n${monthly}`, {
    clock,
    store,
    upstream: () => ({ status: upstreamStatus }),
    deps: { usage, ledger, notices },
  })
  const flush = async () => {
    await usage.flush()
    await ledger.flush()
  }
  const ref = { team: 'acme', month: '2026-11', endMs: Date.parse('2026-12-01T00:00:00Z') }
  return { g, store, usageStore, flush, notes, ref, clock }
}

describe('SPEC §5: what a call adds, in process', () => {
  it("an admitted call counts in its base's day; a refused one does not", async () => {
    const a = accounted('rate_limits: { base: 3/min }\nusage: { keep_after: 0 }')
    const statuses = []
    for (let i = 0; i < 5; i++) statuses.push((await a.g.call('GET', rowsOf(SOLO))).status)
    expect(statuses).toEqual([200, 200, 200, 429, 429])
    await a.flush()
    const days = await a.usageStore.read(hex(SOLO), '2026-11-23', '2026-11-23')
    expect(days.get('2026-11-23')).toBe(3)
  })

  it('SPEC §4: a base not worth keeping counts in its class’s others; one past keep_after or near a limit by name from that call on', async () => {
    const a = accounted('rate_limits: { base: 10/min }\nusage: { keep_after: 3 }')
    // Two calls: under keep_after, in others:base. The third makes it worth keeping.
    for (let i = 0; i < 4; i++) expect((await a.g.call('GET', rowsOf(SOLO))).status).toBe(200)
    // A second base at 9 of 10 (90 %) is kept at that call, though under keep_after... no: 9 > 3.
    await a.flush()
    const day = '2026-11-23'
    expect((await a.usageStore.read(hex(SOLO), day, day)).get(day)).toBe(2)
    expect((await a.usageStore.read('others:base', day, day)).get(day)).toBe(2)
    // The others subject is in no index of bases (the export lists it apart).
    expect(await allBases(a.usageStore, '2026-11')).toEqual([hex(SOLO)])
    // Near a limit: a base whose window is at 90 % is kept, though under keep_after.
    const b = accounted('rate_limits: { base: 2/min }\nusage: { keep_after: 1000 }')
    expect((await b.g.call('GET', rowsOf(SOLO))).status).toBe(200)
    expect((await b.g.call('GET', rowsOf(SOLO))).status).toBe(200) // 2 of 2: near
    await b.flush()
    expect((await b.usageStore.read(hex(SOLO), day, day)).get(day)).toBe(1)
    expect((await b.usageStore.read('others:base', day, day)).get(day)).toBe(1)
    // A team's base is known: kept from its first call whatever keep_after says.
    const c = accounted(
      `usage: { keep_after: 1000 }\nmonthly:\n  enabled: false\n  plans: { small: { calls: 10 } }\n  teams: [ { id: acme, plan: small, bases: ["${ACME}"] } ]`
    )
    await c.g.call('GET', rowsOf(ACME))
    await c.flush()
    expect((await c.usageStore.read(hex(ACME), day, day)).get(day)).toBe(1)
    expect((await c.usageStore.read('others:base', day, day)).size).toBe(0)
  })

  it('a call the server failed, given back (charge.server_errors: false), counts nowhere', async () => {
    const a = accounted('rate_limits: { base: 3/min }', 503)
    for (let i = 0; i < 4; i++) expect((await a.g.call('GET', rowsOf(SOLO))).status).toBe(503)
    await a.flush()
    expect((await a.usageStore.read(hex(SOLO), '2026-11-23', '2026-11-23')).size).toBe(0)
  })

  it('monthly quotas off: a team’s calls reach its ledger through the late writer, by day', async () => {
    const a = accounted(
      `monthly:\n  enabled: false\n  plans: { small: { calls: 10 } }\n  teams: [ { id: acme, plan: small, bases: ["${ACME}"] } ]`
    )
    for (let i = 0; i < 4; i++) await a.g.call('GET', rowsOf(ACME))
    a.clock.set(Date.parse('2026-11-24T09:00:00Z'))
    for (let i = 0; i < 2; i++) await a.g.call('GET', rowsOf(ACME))
    await a.flush()
    const month = await a.store.readLedger(a.ref)
    expect(month.used).toBe(6)
    expect(Object.fromEntries(month.days)).toEqual({ '23': 4, '24': 2 })
  })

  it('monthly quotas on: the rate-limit charge is the ledger (no second write); 80 % then 100 % said once; a credit re-arms them', async () => {
    const a = accounted(
      `monthly:\n  enabled: true\n  plans: { small: { calls: 10 } }\n  teams: [ { id: acme, plan: small, bases: ["${ACME}"] } ]`
    )
    const statuses = []
    for (let i = 0; i < 12; i++) statuses.push((await a.g.call('GET', rowsOf(ACME))).status)
    expect(statuses.filter((s) => s === 200)).toHaveLength(10)
    expect(statuses.slice(10)).toEqual([429, 429])
    await a.flush()
    await a.g.tick()
    const month = await a.store.readLedger(a.ref)
    expect(month.used).toBe(10) // once: the late writer did not add them again
    expect(a.notes.map((n) => n.msg)).toEqual(['monthly quota 80% used', 'monthly quota used up'])
    expect(a.notes[1]).toMatchObject({ team: 'acme', used: 10, quota: 10 })

    // A credit of 5 takes the month under both lines: the next crossings are said again.
    await a.store.credit(a.ref, { calls: 5, note: 'outage', atMs: NOW, day: '23', quota: 10 })
    for (let i = 0; i < 5; i++) expect((await a.g.call('GET', rowsOf(ACME))).status).toBe(200)
    await a.g.tick()
    expect(a.notes.map((n) => n.msg)).toEqual([
      'monthly quota 80% used',
      'monthly quota used up',
      'monthly quota 80% used',
      'monthly quota used up',
    ])
    expect((await a.g.call('GET', rowsOf(ACME))).status).toBe(429)
  })
})
