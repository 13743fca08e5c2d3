import { describe, expect, it } from 'vitest'
import { BatchedRecorder, type BatchOps } from '../../src/batch/recorder.js'
import type { BatchId } from '../../src/types.js'
import { FakeClock } from '../helpers/clock.js'

// The contract the day counts, the ledger's late calls and the upgrade report share: batches in
// order, one in doubt at a time, written again whole with the same id until it lands.

/** A store of counts that applies a batch once per id, and whose answers can be lost. */
function store() {
  const applied = new Set<string>()
  const s = {
    total: 0,
    writes: [] as BatchId[],
    /** The next writes: 'ok', 'lost' (applied, answer lost), 'down' (not applied). */
    plan: [] as ('ok' | 'lost' | 'down')[],
  }
  const ops: BatchOps<{ n: number }> = {
    empty: () => ({ n: 0 }),
    isEmpty: (b) => b.n === 0,
    weight: (b) => b.n,
    write: async (b, id) => {
      s.writes.push(id)
      const how = s.plan.shift() ?? 'ok'
      if (how === 'down') throw new Error('down')
      const k = `${id.instance}:${id.seq}`
      if (!applied.has(k)) {
        applied.add(k)
        s.total += b.n
      }
      if (how === 'lost') throw new Error('no answer within 100 ms')
    },
  }
  return { s, ops }
}

describe('BatchedRecorder', () => {
  it('a batch in doubt is written again with its id before anything newer; nothing counts twice', async () => {
    const { s, ops } = store()
    const errors: unknown[] = []
    let back = 0
    const r = new BatchedRecorder(ops, {
      instance: 'p',
      clock: new FakeClock(0),
      onError: (e) => errors.push(e),
      onBack: () => back++,
    })
    s.plan = ['lost', 'down', 'ok', 'ok']
    r.batch.n += 5
    expect(await r.flush()).toBe(false) // applied, but its answer was lost
    r.batch.n += 2 // gathers meanwhile
    expect(r.pending).toBe(7)
    expect(await r.flush()).toBe(false) // the store is down: the same batch waits
    expect(await r.flush()).toBe(true) // the in-doubt batch again (skipped), then the new one
    expect(s.writes.map((w) => w.seq)).toEqual([1, 1, 1, 2])
    expect(s.total).toBe(7)
    expect(errors).toHaveLength(2)
    expect(back).toBe(1)
    expect(r.pending).toBe(0)
  })

  it('stop() tries again within its wait, and says what could not be written', async () => {
    const { s, ops } = store()
    const r = new BatchedRecorder(ops, { instance: 'p', clock: new FakeClock(0) })
    s.plan = ['down']
    r.batch.n += 3
    expect(await r.stop(0)).toBe(3) // no wait: what the store did not take is said
    // With a wait (on the system clock, as at a SIGTERM), a second try lands.
    const { s: s2, ops: ops2 } = store()
    const clock = {
      now: Date.now,
      monotonic: () => performance.now(),
      setTimer: () => ({ cancel() {} }),
    }
    const r2 = new BatchedRecorder(ops2, { instance: 'q', clock })
    s2.plan = ['down', 'ok']
    r2.batch.n += 4
    expect(await r2.stop(2000)).toBe(0)
    expect(s2.total).toBe(4)
  })

  it('writes nothing when nothing was counted', async () => {
    const { s, ops } = store()
    const r = new BatchedRecorder(ops, { instance: 'p', clock: new FakeClock(0) })
    expect(await r.flush()).toBe(true)
    expect(s.writes).toEqual([])
  })

  it('start() flushes on the clock', async () => {
    const { s, ops } = store()
    const clock = new FakeClock(0)
    const r = new BatchedRecorder(ops, { instance: 'p', clock })
    r.start(2000)
    r.batch.n += 1
    clock.advance(1999)
    await Promise.resolve()
    expect(s.writes).toEqual([])
    clock.advance(1)
    await new Promise((res) => setImmediate(res))
    expect(s.total).toBe(1)
    await r.stop()
  })
})
