import { availableParallelism } from 'node:os'
import { describe, expect, it } from 'vitest'
import { resolveWorkers } from '../../src/process/worker-count.js'

describe('resolveWorkers', () => {
  it('auto is one worker per available core, N is N', () => {
    expect(resolveWorkers('auto', 6)).toBe(6)
    expect(resolveWorkers('auto', 0)).toBe(1)
    expect(resolveWorkers('auto')).toBe(availableParallelism())
    expect(resolveWorkers(3, 6)).toBe(3)
  })
})
