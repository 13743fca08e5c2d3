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
    // Issue #41: admitted and refused apart.
    expect(c.busiest).toEqual([
      { key: 'base:a', calls: 6, admitted: 5, refused: 1 },
      { key: 'ip:1.2.3.4', calls: 1, admitted: 1, refused: 0 },
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
    expect(m.busiest[0]).toEqual({ key: 'base:x', calls: 2, admitted: 2, refused: 0 })
    expect(m.busiest[1]).toEqual({ key: 'base:y', calls: 1, admitted: 0, refused: 1 })
  })

  it('SPEC §7: the server failing after 3 failed calls in a row, since the first of them; answering again after 2 good ones, with how long it lasted from that first failure', () => {
    const changes: boolean[] = []
    const r = new StatusRecorder((failing) => changes.push(failing))
    const call = (at: number, status: number) =>
      r.record('base', status >= 500 ? 'upstream_5xx' : 'forwarded', 'base:a', at, {
        status,
        upstreamMs: 1,
      })
    call(T, 200)
    call(T + 1000, 502)
    call(T + 2000, 502)
    expect(r.counts(T + 2000).upstream.health.state).toBe('ok')
    call(T + 3000, 502)
    expect(r.counts(T + 3000).upstream.health).toMatchObject({
      state: 'failing',
      since_ms: T + 1000,
      error: '502',
      last: null,
    })
    call(T + 9000, 200)
    expect(r.counts(T + 9000).upstream.health.state).toBe('failing')
    call(T + 10_000, 200)
    const over = { start_ms: T + 1000, end_ms: T + 10_000, lasted_s: 9, error: '502' }
    expect(r.counts(T + 10_000).upstream.health).toEqual({
      state: 'ok',
      since_ms: null,
      error: null,
      last: over,
      episodes: [over],
    })
    expect(changes).toEqual([true, false])
    // Workers merged: failing when one is, since the earliest.
    const other = new StatusRecorder()
    for (let i = 0; i < 3; i++)
      other.record('base', 'upstream_error', undefined, T + 20_000 + i, {
        status: 502,
        upstreamMs: null,
        error: 'ECONNREFUSED',
      })
    const m = mergeCounts([r.counts(T + 21_000), other.counts(T + 21_000)])
    expect(m.upstream.health).toMatchObject({
      state: 'failing',
      since_ms: T + 20_000,
      error: '502 ECONNREFUSED',
      last: over,
    })
  })

  it('half of the last 10 s failing is failing too, without 3 in a row', () => {
    const r = new StatusRecorder()
    for (let i = 0; i < 4; i++)
      r.record('base', i % 2 ? 'upstream_5xx' : 'forwarded', undefined, T + i * 100, {
        status: i % 2 ? 503 : 200,
        upstreamMs: 1,
      })
    expect(r.counts(T + 400).upstream.health.state).toBe('failing')
  })
})
