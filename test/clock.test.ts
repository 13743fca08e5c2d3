import { describe, expect, it } from 'vitest'
import { systemClock } from '../src/clock.js'

describe('systemClock.setTimer', () => {
  it('runs a timer whose deadline has passed at once, without a warning on stderr', async () => {
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(w.name)
    process.on('warning', onWarning)
    try {
      await new Promise<void>((resolve) => void systemClock.setTimer(resolve, -5.2))
      // Warnings are emitted on the next tick after the timer is set.
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('warning', onWarning)
    }
    expect(warnings).not.toContain('TimeoutNegativeWarning')
  })
})
