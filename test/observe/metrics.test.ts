import { describe, expect, it } from 'vitest'
import { Metrics } from '../../src/observe/metrics.js'

const value = (text: string, line: string) =>
  Number(
    text
      .split('\n')
      .find((l) => l.startsWith(line + ' '))
      ?.slice(line.length + 1) ?? NaN
  )

describe('Metrics.renderWith (a primary and its workers)', () => {
  it('adds counters and histograms, merges gauges by max (last reload ok by min)', async () => {
    const primary = new Metrics({ version: '9.9.9', processMetrics: false })
    const w1 = new Metrics({ version: '9.9.9', processMetrics: false })
    const w2 = new Metrics({ version: '9.9.9', processMetrics: false })
    w1.countRequest('base', 'forwarded')
    w1.countRequest('base', 'rate_limited')
    w2.countRequest('base', 'forwarded')
    w2.countRequest('base', 'forwarded')
    w1.storeDuration.observe(0.001)
    w2.storeDuration.observe(0.003)
    w1.monthlyUsed.set({ team: 'acme' }, 40)
    w2.monthlyUsed.set({ team: 'acme' }, 42)
    primary.countReload(false)
    const text = await primary.renderWith([await w1.snapshot(), await w2.snapshot()])
    expect(value(text, 'basegate_requests_total{class="base",outcome="forwarded"}')).toBe(3)
    expect(value(text, 'basegate_requests_total{class="base",outcome="rate_limited"}')).toBe(1)
    expect(value(text, 'basegate_refusals_total{reason="rate"}')).toBe(1)
    expect(value(text, 'basegate_store_duration_seconds_count')).toBe(2)
    expect(value(text, 'basegate_store_duration_seconds_bucket{le="0.002"}')).toBe(1)
    expect(value(text, 'basegate_monthly_used{team="acme"}')).toBe(42)
    expect(value(text, 'basegate_build_info{version="9.9.9",node="' + process.version + '"}')).toBe(
      1
    )
    expect(value(text, 'basegate_config_last_reload_successful')).toBe(0)
    expect(value(text, 'basegate_config_reloads_total{result="refused"}')).toBe(1)
  })
})

// Issue #22 item 3: what a SIGKILL would lose (calls of shares held) shows in /metrics, summed
// over the workers.
describe('basegate_lease_calls_held', () => {
  it('reads the leasing store at each scrape, and the primary adds the workers up', async () => {
    const primary = new Metrics({ version: '9.9.9', processMetrics: false })
    const w1 = new Metrics({ version: '9.9.9', processMetrics: false })
    const w2 = new Metrics({ version: '9.9.9', processMetrics: false })
    let held = 7
    w1.watchLeases(() => held)
    w2.watchLeases(() => 5)
    expect(value(await w1.registry.metrics(), 'basegate_lease_calls_held')).toBe(7)
    held = 3
    const text = await primary.renderWith([await w1.snapshot(), await w2.snapshot()])
    expect(value(text, 'basegate_lease_calls_held')).toBe(8)
  })
})
