import { decodeList } from 'structured-field-values'
import { describe, expect, it } from 'vitest'
import { ietfFields } from '../../src/http/ietf-headers.js'
import type { Charge, Decision, WindowState } from '../../src/types.js'

// SPEC §10: the IETF draft's fields, read back with a structured-field parser of another
// implementation (not a regex) and checked against the windows they describe.

const NOW = Date.UTC(2026, 10, 23, 12)
const MONTH_END = Date.UTC(2026, 11, 1)
const MONTH_START = Date.UTC(2026, 10, 1)

const base: Charge = { kind: 'class', key: 'b', limit: 500, windowMs: 60_000, cls: 'base' }
const hourly: Charge = { kind: 'class', key: 'b2', limit: 6000, windowMs: 3_600_000, cls: 'base' }
const rule: Charge = {
  kind: 'rule',
  key: 'r',
  limit: 100,
  windowMs: 60_000,
  cls: 'base',
  rule: 'list-rows',
  dryRun: false,
}
const shadow: Charge = { ...rule, key: 's', rule: 'trial', dryRun: true }
const month: Charge = {
  kind: 'monthly',
  key: 'm',
  limit: 120_000,
  cls: 'base',
  endMs: MONTH_END,
  quotaKey: 'q',
  day: '15',
  month: '2026-11',
  team: 'acme',
}

const win = (limit: number, used: number, resetAtMs: number, retryAtMs = 0): WindowState => ({
  limit,
  used,
  remaining: Math.max(0, limit - used),
  resetAtMs,
  retryAtMs,
})

/** The fields as parsed data: name → its parameters. */
function read(value: string): Map<string, Record<string, number>> {
  const out = new Map<string, Record<string, number>>()
  for (const item of decodeList(value) as unknown as {
    value: string
    params: Record<string, number>
  }[])
    out.set(item.value, item.params)
  return out
}

describe('ietfFields', () => {
  it('lists every policy of the call with q and w, and r and t for each', () => {
    const d: Decision = {
      allowed: true,
      nowMs: NOW,
      windows: [
        win(500, 1, NOW + 60_000),
        win(6000, 10, NOW + 1_200_000),
        win(100, 7, NOW + 31_500),
        win(100, 200, NOW + 5_000, NOW + 5_000),
        win(120_000, 1000, MONTH_END),
      ],
    }
    const f = ietfFields(d, [base, hourly, rule, shadow, month], () => MONTH_START)!
    const policy = read(f['ratelimit-policy'])
    const state = read(f.ratelimit)
    expect([...policy.keys()]).toEqual(['base', 'base-3600', 'list-rows', 'monthly'])
    expect(policy.get('base')).toEqual({ q: 500, w: 60 })
    expect(policy.get('base-3600')).toEqual({ q: 6000, w: 3600 })
    expect(policy.get('monthly')).toEqual({ q: 120_000, w: 30 * 86_400 })
    expect(state.get('base')).toEqual({ r: 499, t: 60 })
    expect(state.get('list-rows')).toEqual({ r: 93, t: 32 })
    expect(state.get('monthly')).toEqual({ r: 119_000, t: Math.ceil((MONTH_END - NOW) / 1000) })
    expect(state.has('trial')).toBe(false) // a dry-run rule is not shown
  })

  it('a refusing window shows r=0 and t until it admits again', () => {
    const d: Decision = {
      allowed: false,
      nowMs: NOW,
      windows: [win(500, 500, NOW + 1_000, NOW + 12_300)],
    }
    const state = read(ietfFields(d, [base], () => MONTH_START)!.ratelimit)
    expect(state.get('base')).toEqual({ r: 0, t: 13 })
  })
})
