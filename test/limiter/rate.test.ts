import { describe, expect, it } from 'vitest'
import { parseRate } from '../../src/limiter/rate.js'

describe('parseRate', () => {
  it.each([
    ['500/min', 500, 60_000],
    ['10/s', 10, 1_000],
    ['10/sec', 10, 1_000],
    ['10/second', 10, 1_000],
    ['3000/minute', 3000, 60_000],
    ['6000/hour', 6000, 3_600_000],
    ['1/day', 1, 86_400_000],
    [' 7 / MIN ', 7, 60_000],
  ])('%s', (text, limit, windowMs) => {
    expect(parseRate(text)).toMatchObject({ limit, windowMs })
  })

  it('reads unlimited as no limit', () => {
    expect(parseRate('unlimited')).toBeNull()
    expect(parseRate('Unlimited')).toBeNull()
  })

  it.each(['500/mn', '500', '/min', '0/min', '-1/min', '1.5/min', '500/week', 'lots'])(
    'refuses %s',
    (text) => {
      expect(parseRate(text)).toBeUndefined()
    }
  )
})
