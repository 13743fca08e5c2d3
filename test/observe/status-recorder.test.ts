import { describe, expect, it } from 'vitest'
import { mergeCounts, STEPS, STEP_S, StatusRecorder } from '../../src/observe/status-recorder.js'

describe('the status page counts (SPEC §7)', () => {
  const T = 1_800_000_000_000

  it('counts calls per 10-second step by class and outcome, and the busiest keys, over 15 minutes', () => {
    const r = new StatusRecorder()
    for (let i = 0; i < 5; i++) r.record('base', 'forwarded', 'base:a', T)
    r.record('base', 'rate_limited', 'base:a', T + 1000)
    r.record('other', 'forwarded', 'ip:1.2.3.4', T + 12_000)
    r.record('base', 'forwarded', 'base:b', T - 20 * 60_000) // older than 15 minutes
    const c = r.counts(T + 12_000)
    expect(c.series['base/forwarded']!.length).toBe(STEPS)
    const total = (n: string) => c.series[n]!.reduce((a, b) => a + b, 0)
    expect(total('base/forwarded')).toBe(5)
    expect(total('base/rate_limited')).toBe(1)
    expect(c.series['other/forwarded']!.at(-1)).toBe(1)
    expect(c.busiest).toEqual([
      { key: 'base:a', calls: 6 },
      { key: 'ip:1.2.3.4', calls: 1 },
    ])
  })

  it('merges workers: series aligned on their last step, keys added up', () => {
    const a = new StatusRecorder()
    const b = new StatusRecorder()
    a.record('base', 'forwarded', 'base:x', T)
    b.record('base', 'forwarded', 'base:x', T + STEP_S * 1000)
    b.record('base', 'shed', 'base:y', T + STEP_S * 1000)
    const m = mergeCounts([a.counts(T), b.counts(T + STEP_S * 1000)])
    expect(m.series['base/forwarded']!.slice(-2)).toEqual([1, 1])
    expect(m.series['base/shed']!.at(-1)).toBe(1)
    expect(m.busiest[0]).toEqual({ key: 'base:x', calls: 2 })
  })
})
