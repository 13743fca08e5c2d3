import { describe, expect, it } from 'vitest'
import { columnOf, OUTCOMES, statusOf } from '../../src/http/outcomes.js'
import { REFUSAL_OF } from '../../src/observe/metrics.js'

// Issue #48 item 4: one table of outcomes, from which the status, the log line, the metrics and
// the page derive.

describe('the outcome table', () => {
  it('the status: the outcome’s own when it carries one, else its row’s', () => {
    expect(statusOf({ kind: 'forwarded', status: 201, upstreamMs: 3 })).toBe(201)
    expect(statusOf({ kind: 'size_refused', status: 413, message: 'x' } as never)).toBe(413)
    expect(statusOf({ kind: 'bad_request', reason: 'x', status: 501 })).toBe(501)
    expect(statusOf({ kind: 'bad_request', reason: 'x' })).toBe(400)
    expect(statusOf({ kind: 'rate_limited' })).toBe(429)
    expect(statusOf({ kind: 'client_aborted', upstreamMs: null })).toBe(0)
    expect(statusOf({ kind: 'shed', waitedMs: 1 })).toBe(503)
    expect(statusOf({ kind: 'gone', entry: 'e', message: 'm' })).toBe(410)
    expect(statusOf({ kind: 'body_timeout', message: 'm', why: 'min_body_rate' })).toBe(408)
  })

  it('every outcome without a status of its own has one in its row', () => {
    const own = new Set([
      'forwarded',
      'upstream_5xx',
      'upstream_error',
      'send_timeout',
      'size_refused',
    ])
    for (const [kind, facts] of Object.entries(OUTCOMES))
      if (!own.has(kind)) expect(facts.status, kind).not.toBeNull()
  })

  it('the columns the metrics and the page read come from the rows', () => {
    expect(REFUSAL_OF).toEqual(columnOf('refusal'))
    expect(REFUSAL_OF.rate_limited).toBe('rate')
    expect(REFUSAL_OF.forwarded).toBeUndefined()
    expect(columnOf('shown').gone).toBe('removed endpoint')
    expect(columnOf('message').forwarded).toBeUndefined()
    // Every outcome has its own colour on the chart, but the two 400s (one kind: refused input).
    const colors = Object.entries(columnOf('color'))
    expect(colors).toHaveLength(Object.keys(OUTCOMES).length)
    const shared = colors.filter(([, c]) => colors.filter(([, d]) => d === c).length > 1)
    expect(shared.map(([k]) => k).sort()).toEqual(['bad_path', 'bad_request'])
  })
})
