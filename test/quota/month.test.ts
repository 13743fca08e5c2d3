import { describe, expect, it } from 'vitest'
import { createMonthClock, monthBounds } from '../../src/quota/month.js'

const iso = (ms: number) => new Date(ms).toISOString()

describe('monthBounds', () => {
  it.each([
    // [now (UTC), zone, month id, start (UTC), end (UTC)]
    [
      '2026-11-22T10:00:00Z',
      'UTC',
      '2026-11',
      '2026-11-01T00:00:00.000Z',
      '2026-12-01T00:00:00.000Z',
    ],
    [
      '2026-12-31T23:59:59Z',
      'UTC',
      '2026-12',
      '2026-12-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ],
    [
      '2027-01-01T00:00:00Z',
      'UTC',
      '2027-01',
      '2027-01-01T00:00:00.000Z',
      '2027-02-01T00:00:00.000Z',
    ],
    // Berlin is UTC+1 in winter: the year turns an hour earlier in UTC.
    [
      '2026-12-31T23:30:00Z',
      'Europe/Berlin',
      '2027-01',
      '2026-12-31T23:00:00.000Z',
      '2027-01-31T23:00:00.000Z',
    ],
    [
      '2026-12-31T22:30:00Z',
      'Europe/Berlin',
      '2026-12',
      '2026-11-30T23:00:00.000Z',
      '2026-12-31T23:00:00.000Z',
    ],
    // March: DST starts on the last Sunday; the month starts at UTC+1 and the next at UTC+2.
    [
      '2027-03-15T12:00:00Z',
      'Europe/Berlin',
      '2027-03',
      '2027-02-28T23:00:00.000Z',
      '2027-03-31T22:00:00.000Z',
    ],
    // October: DST ends inside the month.
    [
      '2026-10-30T12:00:00Z',
      'Europe/Berlin',
      '2026-10',
      '2026-09-30T22:00:00.000Z',
      '2026-10-31T23:00:00.000Z',
    ],
    // New York: UTC-5 in winter, UTC-4 in summer; DST starts 2027-03-14.
    [
      '2027-03-20T12:00:00Z',
      'America/New_York',
      '2027-03',
      '2027-03-01T05:00:00.000Z',
      '2027-04-01T04:00:00.000Z',
    ],
    // A leap February, and a plain one.
    [
      '2028-02-29T12:00:00Z',
      'UTC',
      '2028-02',
      '2028-02-01T00:00:00.000Z',
      '2028-03-01T00:00:00.000Z',
    ],
    [
      '2027-02-28T12:00:00Z',
      'UTC',
      '2027-02',
      '2027-02-01T00:00:00.000Z',
      '2027-03-01T00:00:00.000Z',
    ],
    // A zone with a half-hour offset, ahead of UTC.
    [
      '2026-11-30T19:00:00Z',
      'Asia/Kolkata',
      '2026-12',
      '2026-11-30T18:30:00.000Z',
      '2026-12-31T18:30:00.000Z',
    ],
    // Lord Howe: a 30-minute DST shift.
    [
      '2026-11-15T00:00:00Z',
      'Australia/Lord_Howe',
      '2026-11',
      '2026-10-31T13:00:00.000Z',
      '2026-11-30T13:00:00.000Z',
    ],
  ])('%s in %s is %s', (now, zone, id, start, end) => {
    const b = monthBounds(Date.parse(now), zone)
    expect({ id: b.id, start: iso(b.startMs), end: iso(b.endMs) }).toEqual({ id, start, end })
  })

  it('the clock caches until the month ends, then moves on', () => {
    const clock = createMonthClock('UTC')
    const a = clock(Date.parse('2026-11-30T23:59:59.999Z'))
    expect(a.id).toBe('2026-11')
    expect(clock(Date.parse('2026-12-01T00:00:00.000Z')).id).toBe('2026-12')
    expect(clock(Date.parse('2026-11-15T00:00:00.000Z')).id).toBe('2026-11')
  })
})
