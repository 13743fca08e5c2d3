import { systemClock } from '../../src/clock.js'
import type { BufferBudget, ReadOptions } from '../../src/size/body-buffer.js'

/** readHeldBody's options for a test: no bound but `memoryBytes` of memory, no clock bound. */
export function heldReadOptions(
  budget: BufferBudget,
  memoryBytes: number,
  dir: string
): ReadOptions {
  return {
    maxBytes: 1e9,
    budget,
    limits: { memoryBytes, spillBytes: 1e9, clientBytes: 1e9, reserveBytes: 0 },
    client: 'ip:127.0.0.1',
    timeoutMs: null,
    minBodyRate: 0,
    dir,
    setTimer: (fn, ms) => {
      const t = systemClock.setTimer(fn, ms)
      return () => t.cancel()
    },
  }
}
