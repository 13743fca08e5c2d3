import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { monthBounds } from '../../src/quota/month.js'
import {
  callsOn,
  lastFullWeek,
  ledgerRef,
  paceOf,
  readTeamRange,
} from '../../src/usage/ledger-view.js'

// SPEC §5 "History and export": each month its own figures, and the pace of the last 7 full days.

describe('paceOf (issue #40 item 4: the last 7 full days, not the month’s average)', () => {
  const now = Date.parse('2026-11-15T00:00:00Z') // 16 days left in November
  const endMs = monthBounds(now, 'UTC').endMs

  it('a team ramping up is seen at its new pace', () => {
    // 14 quiet days, then 100 a day for the last 7: the month's average would say 50.
    const p = paceOf(
      [100, 100, 100, 100, 100, 100, 100],
      { used: 700, quota: 2000, endMs },
      now,
      'UTC'
    )
    expect(p).toEqual({ per_day: 100, projected: 2300, runs_out: '2026-11-28', used_up_on: null })
  })

  it('no day to run out when the pace ends under the quota; today when it is used up', () => {
    expect(
      paceOf([10, 10, 10, 10, 10, 10, 10], { used: 300, quota: 1000, endMs }, now, 'UTC')
    ).toEqual({
      per_day: 10,
      projected: 460,
      runs_out: null,
      used_up_on: null,
    })
    expect(
      paceOf([5, 5, 5, 5, 5, 5, 5], { used: 1000, quota: 1000, endMs }, now, 'UTC').runs_out
    ).toBe('2026-11-15')
    expect(paceOf([0, 0, 0, 0, 0, 0, 0], { used: 10, quota: null, endMs }, now, 'UTC')).toEqual({
      per_day: 0,
      projected: 10,
      runs_out: null,
      used_up_on: null,
    })
  })

  it('issue #49: today counts; a month used up today says so, on the day it was', () => {
    const noon = Date.parse('2026-11-15T12:00:00Z')
    const days = new Map([['2026-11-15', { calls: 1000, credited: 0 }]])
    const p = paceOf([0, 0, 0, 0, 0, 0, 0], { used: 1000, quota: 1000, endMs }, noon, 'UTC', days)
    expect(p.per_day).toBeCloseTo(1000 / 7.5, 1)
    expect(p.runs_out).toBe('2026-11-15')
    expect(p.used_up_on).toBe('2026-11-15')
    // Used up on the 12th, still used up on the 15th: the 12th is said.
    const earlier = new Map([
      ['2026-11-10', { calls: 600, credited: 0 }],
      ['2026-11-12', { calls: 500, credited: 100 }],
      ['2026-11-13', { calls: 50, credited: 0 }],
    ])
    expect(
      paceOf([0, 0, 600, 0, 400, 50, 0], { used: 1050, quota: 1000, endMs }, noon, 'UTC', earlier)
        .used_up_on
    ).toBe('2026-11-12') // 600 + 500 − 100 credited reach 1,000 on the 12th
  })

  it('the last full week is the 7 days before today, across a month', () => {
    expect(lastFullWeek('2026-12-03')).toEqual({ from: '2026-11-26', to: '2026-12-02' })
  })
})

describe('readTeamRange', () => {
  it('each month with its own quota, used, credited and remaining; days with calls and credits', async () => {
    const store = new MemoryStore()
    const oct = ledgerRef('acme', '2026-10', 'UTC')
    const nov = ledgerRef('acme', '2026-11', 'UTC')
    await store.addToLedger(
      new Map([
        ['{t:acme}:ledger:2026-10', { ref: oct, days: new Map([['31', 40]]) }],
        [
          '{t:acme}:ledger:2026-11',
          {
            ref: nov,
            days: new Map([
              ['01', 10],
              ['02', 5],
            ]),
          },
        ],
      ]),
      { instance: 'x', seq: 1 }
    )
    await store.credit(nov, { calls: 3, note: 'outage', atMs: 0, day: '02', quota: 100 })
    const r = await readTeamRange(
      store,
      'acme',
      { from: '2026-10-30', to: '2026-11-02', timeZone: 'UTC' },
      { month: '2026-11', quota: 100 }
    )
    expect(r.months).toEqual([
      { month: '2026-10', quota: null, used: 40, credited: 0, remaining: null },
      { month: '2026-11', quota: 100, used: 12, credited: 3, remaining: 88 },
    ])
    expect(callsOn(r.days, '2026-10-30', '2026-11-02')).toEqual([0, 40, 10, 5])
    expect(r.days.get('2026-11-02')).toEqual({ calls: 5, credited: 3 })
    // used = Σ days − Σ credits, month by month.
    for (const m of r.months) {
      const days = [...r.ledgers.get(m.month)!.days.values()].reduce((a, b) => a + b, 0)
      expect(m.used).toBe(days - m.credited)
    }
  })
})
