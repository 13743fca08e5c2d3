import { describe, expect, it } from 'vitest'
import { systemClock } from '../../src/clock.js'
import { below, nodeProblem } from '../../src/node-version.js'
import { runtimeOf } from '../../src/process/runtime.js'

// Issue #41 item 6: the environment's numbers are checked as the file's values are.

describe('runtimeOf', () => {
  it('reads whole milliseconds, and the defaults when unset', () => {
    const { runtime, problems } = runtimeOf({ BASEGATE_SUMMARY_MS: '5000' }, systemClock)
    expect(problems).toEqual([])
    expect(runtime).toMatchObject({ summaryMs: 5000, usageFlushMs: 2000, reportFlushMs: 2000 })
  })

  it.each([
    [
      'BASEGATE_SUMMARY_MS',
      '60s',
      '"60s" is not a whole number of milliseconds (write 60000 for 60 s)',
    ],
    [
      'BASEGATE_USAGE_FLUSH_MS',
      '2s',
      '"2s" is not a whole number of milliseconds (write 2000 for 2 s)',
    ],
    [
      'BASEGATE_USAGE_FLUSH_MS',
      '9000',
      '9000 is not from 100 to 5000 ms (SPEC §5: counts are written at least every 5 s)',
    ],
    [
      'BASEGATE_REPORT_FLUSH_MS',
      '-1',
      '"-1" is not a whole number of milliseconds (write 2000 for 2 s)',
    ],
    [
      'BASEGATE_SERVER_INFO_MS',
      '1e3',
      '"1e3" is not a whole number of milliseconds (write 600000 for 600 s)',
    ],
    ['LOG_LEVEL', 'loud', '"loud" is not a level (fatal, error, warn, info, debug, trace, silent)'],
  ])('%s=%s is a problem naming it', (name, value, message) => {
    const { problems } = runtimeOf({ [name]: value }, systemClock)
    expect(problems).toEqual([{ field: name, message }])
  })
})

describe('the Node it runs on (issue #41 item 7)', () => {
  it('a Node below engines says so in one line', () => {
    expect(below('18.19.0', '24')).toBe(true)
    expect(below('24.0.0', '24')).toBe(false)
    expect(below('24.21.0', '22.12.0')).toBe(false)
    expect(nodeProblem('18.19.0', '24')).toMatch(
      /^basegate needs Node\.js 24 or later; this is 18\.19\.0/
    )
    expect(nodeProblem(process.versions.node)).toBeNull()
  })
})
