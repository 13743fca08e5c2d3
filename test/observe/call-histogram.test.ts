import { AggregatorRegistry, Histogram, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { CallHistogram } from '../../src/observe/call-histogram.js'

// SPEC §12: the histograms every call observes count into a typed array; what a scrape reads
// must be what prom-client's own Histogram says for the same values, alone and merged across
// workers (AggregatorRegistry), so the change is invisible to dashboards and alerts.

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
// On the bounds, between them, past the last, zero, and a value that is not a number.
const VALUES = [0, 0.001, 0.0011, 0.0025, 0.003, 0.07, 0.1, 1, 2.49, 59.9, 60, 61, 1234.5]

function pair(values: readonly number[]) {
  const ours = new Registry()
  const theirs = new Registry()
  const h = new CallHistogram('x_seconds', 'Some help', BUCKETS, ours)
  const p = new Histogram({
    name: 'x_seconds',
    help: 'Some help',
    buckets: BUCKETS,
    registers: [theirs],
  })
  for (const v of values) {
    h.observe(v)
    p.observe(v)
  }
  return { ours, theirs, h }
}

describe('CallHistogram', () => {
  it('exposes what prom-client’s Histogram exposes for the same values', async () => {
    const { ours, theirs } = pair(VALUES)
    expect(await ours.metrics()).toBe(await theirs.metrics())
    expect(await ours.metrics()).toContain('x_seconds_bucket{le="+Inf"} 13')
  })

  it('exposes zeros before any value, as prom-client does for a histogram without labels', async () => {
    const { ours, theirs } = pair([])
    expect(await ours.metrics()).toBe(await theirs.metrics())
  })

  it('merges across workers as prom-client’s does', async () => {
    const a = pair(VALUES.slice(0, 5))
    const b = pair(VALUES.slice(5))
    const ours = AggregatorRegistry.aggregate([
      await a.ours.getMetricsAsJSON(),
      await b.ours.getMetricsAsJSON(),
    ])
    const theirs = AggregatorRegistry.aggregate([
      await a.theirs.getMetricsAsJSON(),
      await b.theirs.getMetricsAsJSON(),
    ])
    expect(await ours.metrics()).toBe(await theirs.metrics())
  })

  it('ignores a value that is not finite (prom-client would throw on a call)', async () => {
    const { ours, h } = pair([0.002])
    h.observe(Number.NaN)
    h.observe(Number.POSITIVE_INFINITY)
    expect(await ours.metrics()).toContain('x_seconds_count 1')
  })

  it('starts again at reset, as a new one (prom-client’s shows nothing until its next value)', async () => {
    const { ours, h } = pair(VALUES)
    h.reset()
    expect(await ours.metrics()).toBe(await pair([]).theirs.metrics())
  })
})
