import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/load.js'
import { connectionCaps, openFileLimit } from '../../src/process/connection-caps.js'

// SPEC §4 "Connections": the caps one process applies, from the file and the open-file limit.

const config = (yaml: string) => {
  const r = parseConfig(yaml, {})
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  return r.config
}

describe('connectionCaps', () => {
  it('auto is 90 % of the open-file limit less the upstream pool and the store', () => {
    expect(connectionCaps(config('{}'), 1, 1024)).toEqual({ total: 921 - 256, perClient: 256 })
    const redis = config(
      'store: { url: "redis://127.0.0.1:6379" }\nupstream: { max_connections: 64 }'
    )
    expect(connectionCaps(redis, 1, 20_000).total).toBe(18_000 - 64 - 8)
    // An unknown limit is read as Linux's usual 1024; never below 16.
    expect(connectionCaps(config('{}'), 1, null).total).toBe(665)
    expect(connectionCaps(config('{}'), 1, 100).total).toBe(16)
  })

  it('with workers, each process takes its share of the numbers the file gives', () => {
    const c = config(
      'store: { url: "redis://127.0.0.1:6379" }\nworkers: 4\nlisten: { max_connections: 1000, max_connections_per_client: 10 }'
    )
    expect(connectionCaps(c, 4, 20_000)).toEqual({ total: 250, perClient: 3 })
  })

  it('reads the soft limit from /proc/self/limits', () => {
    const text = `Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n`
    expect(openFileLimit(() => text)).toBe(1024)
    expect(openFileLimit(() => 'Max open files unlimited unlimited files')).toBeNull()
    expect(
      openFileLimit(() => {
        throw new Error('no /proc')
      })
    ).toBeNull()
    expect(openFileLimit()).toBeGreaterThan(0)
  })
})
