import { describe, expect, it } from 'vitest'
import { end } from '../../src/spine/steps.js'
import { FakeClock } from '../helpers/clock.js'

// Issue #48 item 5: end() under its own guard. A part that throws while a call is freed (a bug)
// never leaves the other parts held, never skips the line, and never reaches the process.

function fixture(throwing: 'ticket' | 'share' | 'account' | 'finish' | null) {
  const freed: string[] = []
  const errors: string[] = []
  const boom = (what: string) => {
    if (throwing === what) throw new Error(`${what} broke`)
  }
  const call = {
    ended: false,
    held: {
      ticket: { release: () => (boom('ticket'), freed.push('ticket')) },
      share: 'share-1',
      key: 'base:k',
      body: () => freed.push('body'),
      tunnel: () => freed.push('tunnel'),
    },
    gate: null,
    givenBack: null,
    method: 'GET',
    dryRun: null,
    bodyChanges: [],
  }
  const flow = {
    shares: { give: () => (boom('share'), freed.push('share')) },
    guard: { leaveKey: () => freed.push('key') },
    account: () => (boom('account'), freed.push('account')),
    finish: () => (boom('finish'), freed.push('line')),
    clock: new FakeClock(Date.UTC(2026, 10, 28)),
    logger: { error: (_o: unknown, msg: string) => errors.push(msg) },
  }
  return { call, flow, freed, errors }
}

describe('end(): every exit frees what the call holds and writes its line', () => {
  it('in the common case: every part, once', () => {
    const { call, flow, freed, errors } = fixture(null)
    end(call as never, flow as never, { kind: 'forwarded' } as never)
    end(call as never, flow as never, { kind: 'forwarded' } as never)
    expect(freed).toEqual(['ticket', 'share', 'key', 'body', 'tunnel', 'account', 'line'])
    expect(errors).toEqual([])
    expect(call.held).toEqual({ ticket: null, share: null, key: null, body: null, tunnel: null })
  })

  it.each([
    [
      'ticket',
      ['share', 'key', 'body', 'tunnel', 'account', 'line'],
      'freeing what a call held failed',
    ],
    [
      'share',
      ['ticket', 'key', 'body', 'tunnel', 'account', 'line'],
      'freeing what a call held failed',
    ],
    ['account', ['ticket', 'share', 'key', 'body', 'tunnel', 'line'], 'counting a call failed'],
    [
      'finish',
      ['ticket', 'share', 'key', 'body', 'tunnel', 'account'],
      "writing a call's line failed",
    ],
  ] as const)('a throw in %s: the rest is done, the throw logged', (part, rest, said) => {
    const { call, flow, freed, errors } = fixture(part)
    expect(() => end(call as never, flow as never, { kind: 'forwarded' } as never)).not.toThrow()
    expect(freed).toEqual(rest)
    expect(errors).toEqual([said])
    expect(call.held).toEqual({ ticket: null, share: null, key: null, body: null, tunnel: null })
  })
})
