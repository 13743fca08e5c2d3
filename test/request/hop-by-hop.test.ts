import { describe, expect, it } from 'vitest'
import { connectionTokens } from '../../src/request/hop-by-hop.js'

// RFC 9110 §7.6.1: the header names a Connection header lists are hop-by-hop too; its own
// options `close` and `keep-alive` name no header.
describe('connectionTokens', () => {
  it.each([
    [undefined, null],
    ['keep-alive', null],
    ['Keep-Alive', null],
    ['close', null],
    ['CLOSE', null],
    [' , ,', null],
    ['keep-alive, close', null],
    ['Upgrade', ['upgrade']],
    ['keep-alive, X-Secret , Upgrade', ['x-secret', 'upgrade']],
    [['close', 'X-Trace'], ['x-trace']],
    ['keep-alive-x', ['keep-alive-x']],
  ] as const)('%j → %j', (value, names) => {
    const got = connectionTokens(value as string | string[] | undefined)
    expect(got === null ? null : [...got]).toEqual(names)
  })
})
