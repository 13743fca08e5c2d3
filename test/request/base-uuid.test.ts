import { describe, expect, it } from 'vitest'
import { hyphenated, parseUuid, shownKey } from '../../src/request/base-uuid.js'

// SPEC §3 (a base counted under its UUID lower-cased without hyphens) and §7 (written
// hyphenated wherever an operator reads it).

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

describe('base UUIDs', () => {
  it('every spelling counts as one base; shown hyphenated', () => {
    for (const form of [U, U.toUpperCase(), U.replace(/-/g, ''), U.replace(/-/g, '').toUpperCase()])
      expect(parseUuid(form)).toBe(U.replace(/-/g, ''))
    expect(hyphenated(parseUuid(U.toUpperCase())!)).toBe(U)
  })

  it('a key as an operator reads it: a base hyphenated, other keys as they are', () => {
    expect(shownKey(`base:${U.replace(/-/g, '')}`)).toBe(`base:${U}`)
    expect(shownKey('ip:127.0.0.1')).toBe('ip:127.0.0.1')
    expect(shownKey('team:acme')).toBe('team:acme')
    expect(shownKey('base:others')).toBe('base:others')
  })
})
