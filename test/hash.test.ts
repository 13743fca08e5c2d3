import { describe, expect, it } from 'vitest'
import { fnv1a } from '../src/hash.js'

describe('fnv1a', () => {
  it('is FNV-1a (32 bits): the published vectors', () => {
    expect(fnv1a('') >>> 0).toBe(0x811c9dc5)
    expect(fnv1a('a') >>> 0).toBe(0xe40c292c)
    expect(fnv1a('foobar') >>> 0).toBe(0xbf9cf968)
  })

  it('chains: the hash of a string continued is the hash of the two written together', () => {
    expect(fnv1a('bar', fnv1a('foo'))).toBe(fnv1a('foobar'))
  })
})
