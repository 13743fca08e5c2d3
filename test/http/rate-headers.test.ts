import { describe, expect, it } from 'vitest'
import { rateHeaderValues, retryAfterSec } from '../../src/http/rate-headers.js'
import type { WindowState } from '../../src/types.js'

const w = (p: Partial<WindowState>): WindowState => ({
  limit: 10,
  used: 0,
  remaining: 10,
  resetAtMs: 0,
  retryAtMs: 0,
  ...p,
})

describe('rate headers (SPEC §4)', () => {
  it('describe the window with the fewest calls left', () => {
    const hv = rateHeaderValues({
      allowed: true,
      nowMs: 0,
      windows: [
        w({ limit: 500, remaining: 400, resetAtMs: 1_000_500 }),
        w({ limit: 100, remaining: 3, resetAtMs: 2_000_001 }),
      ],
    })
    expect(hv).toEqual({ limit: 100, remaining: 3, resetSec: 2001 })
  })

  it('on a refusal: remaining 0, reset when a call is admitted again (the latest refusing window)', () => {
    const d = {
      allowed: false,
      nowMs: 8_999_000,
      windows: [
        w({ limit: 500, remaining: 0, retryAtMs: 5_000_000 }),
        w({ limit: 100, remaining: 0, retryAtMs: 9_000_001 }),
        w({ limit: 9, remaining: 3 }),
      ],
    }
    expect(rateHeaderValues(d)).toEqual({ limit: 100, remaining: 0, resetSec: 9001 })
    expect(retryAfterSec(d)).toBe(2)
  })

  it('retry-after is whole seconds rounded up, at least 1', () => {
    const d = (at: number) => ({
      allowed: false,
      nowMs: 1_000,
      windows: [w({ retryAtMs: at, remaining: 0 })],
    })
    expect(retryAfterSec(d(1_000))).toBe(1)
    expect(retryAfterSec(d(1_001))).toBe(1)
    expect(retryAfterSec(d(2_001))).toBe(2)
    expect(retryAfterSec(d(61_000))).toBe(60)
  })

  it('no windows, no headers', () => {
    expect(rateHeaderValues({ allowed: true, windows: [], nowMs: 0 })).toBeNull()
  })
})

describe('rate headers with a monthly quota (SPEC §4, §5)', () => {
  const rate = {
    key: 'r',
    limit: 200,
    windowMs: 60_000,
    kind: 'class' as const,
    cls: 'base' as const,
  }
  const month = {
    key: 'm',
    limit: 3000,
    kind: 'monthly' as const,
    cls: 'base' as const,
    endMs: 9_000_000_000,
    quotaKey: 'o',
    day: '15',
    month: '2026-11',
    team: 't',
  }

  it('the quota does not show while it lasts', () => {
    const hv = rateHeaderValues(
      {
        allowed: true,
        nowMs: 0,
        windows: [
          w({ limit: 200, remaining: 150, resetAtMs: 1_000_000 }),
          w({ limit: 3000, remaining: 2, resetAtMs: 9_000_000_000 }),
        ],
      },
      [rate, month]
    )
    expect(hv).toEqual({ limit: 200, remaining: 150, resetSec: 1000 })
  })

  it('used up: remaining 0, reset at the next month, limit still the minute limit', () => {
    const d = {
      allowed: false,
      nowMs: 8_000_000_000,
      windows: [
        w({ limit: 200, remaining: 150, resetAtMs: 1_000_000 }),
        w({ limit: 3000, remaining: 0, retryAtMs: 9_000_000_000 }),
      ],
    }
    expect(rateHeaderValues(d, [rate, month])).toEqual({
      limit: 200,
      remaining: 0,
      resetSec: 9_000_000,
    })
    expect(retryAfterSec(d, [rate, month])).toBe(1_000_000)
  })
})
