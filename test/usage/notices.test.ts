import { describe, expect, it } from 'vitest'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import type { LedgerRef, Logger } from '../../src/types.js'
import { MonthlyNotices, NOTICE_RETRY_MS, type NoticeStore } from '../../src/usage/notices.js'
import { FakeClock } from '../helpers/clock.js'

// SPEC §5 notices (issue #40 item 7): never lost, the 100 % line after the 80 % one, re-armed.

const ref: LedgerRef = { team: 'acme', month: '2026-11', endMs: Date.parse('2026-12-01') }
const flush = () => new Promise((r) => setImmediate(r))

function logger() {
  const said: { fields: Record<string, unknown>; msg: string }[] = []
  const l = { warn: (fields: Record<string, unknown>, msg: string) => said.push({ fields, msg }) }
  return { said, logger: l as unknown as Logger }
}

/** A store whose claims fail, answer late (applied, then a timeout), or go through. */
function flakyStore(plan: ('ok' | 'late' | 'down')[]) {
  const mem = new MemoryStore()
  const store: NoticeStore = {
    claimNotice: async (r, t, token) => {
      const how = plan.shift() ?? 'ok'
      if (how === 'down') throw new Error('redis: no answer within 100 ms')
      const won = await mem.claimNotice(r, t, token)
      if (how === 'late') throw new Error('redis: no answer within 100 ms')
      return won
    },
  }
  return { store, mem }
}

describe('MonthlyNotices', () => {
  it('a claim answered late is still this process’s: the notice is said, once', async () => {
    const { said, logger: log } = logger()
    const clock = new FakeClock(0)
    const { store } = flakyStore(['late', 'ok', 'ok'])
    const n = new MonthlyNotices(store, log, { token: 'p1', clock })
    n.seen(ref, 8, 10)
    await flush()
    expect(said).toEqual([])
    clock.advance(NOTICE_RETRY_MS) // asked again, with no other call of the team
    await flush()
    expect(said.map((s) => s.msg)).toEqual(['monthly quota 80% used'])
    n.stop()
  })

  it('the 100 % line waits until the 80 % one is decided', async () => {
    const { said, logger: log } = logger()
    const clock = new FakeClock(0)
    const { store } = flakyStore(['down', 'ok', 'ok'])
    const n = new MonthlyNotices(store, log, { token: 'p1', clock })
    n.seen(ref, 10, 10) // past both at once
    await flush()
    expect(said).toEqual([])
    clock.advance(NOTICE_RETRY_MS)
    for (let i = 0; i < 3; i++) await flush()
    expect(said.map((s) => s.msg)).toEqual(['monthly quota 80% used', 'monthly quota used up'])
    n.stop()
  })

  it('another instance’s claim wins; a credit that takes the count back under re-arms it', async () => {
    const { said, logger: log } = logger()
    const clock = new FakeClock(0)
    const mem = new MemoryStore()
    const a = new MonthlyNotices(mem, log, { token: 'a', clock })
    const b = new MonthlyNotices(mem, log, { token: 'b', clock })
    a.seen(ref, 10, 10)
    for (let i = 0; i < 3; i++) await flush()
    b.seen(ref, 10, 10)
    for (let i = 0; i < 3; i++) await flush()
    expect(said.map((s) => s.msg)).toEqual(['monthly quota 80% used', 'monthly quota used up'])
    // A credit of 5 (the store forgets the claims), then the team uses itself up again.
    await mem.credit(ref, { calls: 5, note: null, atMs: 0, day: '20', quota: 10 })
    b.seen(ref, 5, 10)
    a.seen(ref, 5, 10)
    b.seen(ref, 10, 10)
    for (let i = 0; i < 3; i++) await flush()
    a.seen(ref, 10, 10)
    for (let i = 0; i < 3; i++) await flush()
    expect(said.map((s) => s.msg)).toEqual([
      'monthly quota 80% used',
      'monthly quota used up',
      'monthly quota 80% used',
      'monthly quota used up',
    ])
    expect(said[3]!.fields).toMatchObject({ team: 'acme', used: 10, quota: 10 })
  })
})
