import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigHolder } from '../../src/config/holder.js'
import { loadConfigFile } from '../../src/config/load.js'

// Issue #11: a reload that could open the admin API, and what a reload cannot change.

async function holderFor(yaml: string) {
  const file = join(mkdtempSync(join(tmpdir(), 'bg-holder-')), 'limits.yaml')
  writeFileSync(file, yaml)
  const r = await loadConfigFile(file)
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  return { file, holder: new ConfigHolder(file, r.config, {}) }
}

describe('ConfigHolder.reload', () => {
  it('refuses an empty file (an editor mid-save) and keeps the running configuration', async () => {
    const { file, holder } = await holderFor('admin: { token: t0k }\nrate_limits: { base: 7/min }')
    for (const text of ['', '   \n', '# only a comment\n']) {
      writeFileSync(file, text)
      const r = await holder.reload()
      expect(r.ok).toBe(false)
      if (!r.ok) expect(r.problems[0]!.message).toContain('empty')
      expect(holder.current.config.admin.token).toBe('t0k')
      expect(holder.current.config.rateLimits.base[0]!.limit).toBe(7)
    }
  })

  it('never drops the admin token while the listener is on a public address', async () => {
    const { file, holder } = await holderFor('admin: { host: 0.0.0.0, token: t0k }')
    writeFileSync(file, 'admin: { host: 127.0.0.1 }')
    const r = await holder.reload()
    expect(r.ok && r.needsRestart).toContain('admin.token')
    expect(holder.current.config.admin.token).toBe('t0k')
  })

  // Issue #22: a file without the token (half-written, the token line last) opened a loopback
  // admin API on reload: 401 → 200 within 200 ms.
  it('never removes a running token on a loopback listener either (a restart can)', async () => {
    const { file, holder } = await holderFor('admin: { token: t0k }\nrate_limits: { base: 7/min }')
    writeFileSync(file, 'rate_limits: { base: 9/min }')
    const r = await holder.reload()
    expect(r.ok && r.needsRestart).toContain('admin.token')
    expect(holder.current.config.admin.token).toBe('t0k')
    expect(holder.current.config.rateLimits.base[0]!.limit).toBe(9) // the rest applies
    writeFileSync(file, 'admin: { token: n3w }')
    await holder.reload()
    expect(holder.current.config.admin.token).toBe('n3w') // a new token is taken at once
  })

  it('keeps restart-only settings at their running values, says which, and applies the rest', async () => {
    const { file, holder } = await holderFor(
      'upstream: { url: "http://127.0.0.1:8000" }\nrate_limits: { base: 7/min }'
    )
    writeFileSync(
      file,
      'upstream: { url: "http://10.9.9.9:8000", timeout_ms: 5000 }\nrate_limits: { base: 9/min }'
    )
    const r = await holder.reload()
    expect(r.ok).toBe(true)
    if (!r.ok) return
    expect(r.needsRestart).toEqual(['upstream.url'])
    // Issue #25: each changed setting by its name in the file, old and new value.
    expect(r.changes).toEqual(
      expect.arrayContaining([
        { setting: 'upstream.timeout_ms', old: 60000, new: 5000 },
        { setting: 'rate_limits.base', old: ['7/min'], new: ['9/min'] },
      ])
    )
    // /v1/config shows what runs: the old URL, the new timeout and limit.
    expect(holder.current.config.upstream).toEqual({
      url: 'http://127.0.0.1:8000',
      timeoutMs: 5000,
      maxConnections: 256,
      maxConnectionsPerClient: 32,
      bufferRequestBytes: 1_048_576,
      bufferResponseBytes: 262_144,
      tunnelIdleMs: 120_000,
      maxTunnels: 128,
    })
    expect(holder.current.config.rateLimits.base[0]!.limit).toBe(9)
  })

  it('keeps the worker count until a restart; adopt() runs a configuration another process validated', async () => {
    const redis = 'store: { url: "redis://127.0.0.1:6379" }\n'
    const { file, holder } = await holderFor(`${redis}workers: 2\nrate_limits: { base: 7/min }`)
    writeFileSync(file, `${redis}workers: auto\nrate_limits: { base: 9/min }`)
    const r = await holder.reload()
    if (!r.ok) throw new Error(JSON.stringify(r.problems))
    expect(r.needsRestart).toEqual(['workers'])
    expect(holder.current.config.workers).toBe(2)
    const other = await holderFor(`${redis}workers: 2\nrate_limits: { base: 3/min }`)
    other.holder.adopt(holder.current.config)
    expect(other.holder.current.config.rateLimits.base[0]!.limit).toBe(9)
  })
})
