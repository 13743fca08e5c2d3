import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { describe, expect, it } from 'vitest'
import { AnswerSpool } from '../../src/http/answer-spool.js'
import { BufferBudget, type HeldLimits } from '../../src/size/body-buffer.js'

// SPEC §4 "Answers": what a slow client has not taken waits in memory, then a temporary file,
// each byte in the held-body budget while it waits.

const LIMITS: HeldLimits = {
  memoryBytes: 1024 * 1024,
  spillBytes: 8 * 1024 * 1024,
  clientBytes: 4 * 1024 * 1024,
  reserveBytes: 64 * 1024,
}

const chunkOf = (i: number, n = 16 * 1024) => Buffer.alloc(n, i % 251)

async function drain(s: AnswerSpool): Promise<Buffer> {
  const out: Buffer[] = []
  for (let c = await s.take(); c !== null; c = await s.take()) out.push(c)
  return Buffer.concat(out)
}

describe('AnswerSpool', () => {
  it('holds in memory up to its part, then on disk, and gives the bytes back in order, counted while they wait', async () => {
    const budget = new BufferBudget()
    const s = new AnswerSpool(budget, LIMITS, 64 * 1024, 'c', tmpdir())
    const sent: Buffer[] = []
    for (let i = 0; i < 20; i++) {
      const c = chunkOf(i)
      sent.push(c)
      expect(s.add(c)).toBe(true)
    }
    expect(s.pending).toBe(20 * 16 * 1024)
    expect(s.spilled).toBe(true)
    expect(budget.inMemory).toBe(64 * 1024)
    expect(budget.onDisk).toBe(16 * 16 * 1024)
    expect(budget.heldBy('c')).toBe(20 * 16 * 1024)
    const got = await drain(s)
    const hash = (b: Buffer) => createHash('sha256').update(b).digest('hex')
    expect(hash(got)).toBe(hash(Buffer.concat(sent)))
    // Taken: every count is given back.
    expect([budget.inMemory, budget.onDisk, budget.heldBy('c')]).toEqual([0, 0, 0])
    s.release()
  })

  it('says no past the client’s share or the disk, and release() frees what waits at once', async () => {
    const budget = new BufferBudget()
    const small = { ...LIMITS, clientBytes: 40 * 1024 }
    const s = new AnswerSpool(budget, small, 16 * 1024, 'c', tmpdir())
    expect(s.add(chunkOf(1))).toBe(true)
    expect(s.add(chunkOf(2))).toBe(true)
    expect(s.add(chunkOf(3))).toBe(false) // past 40 KiB for this client
    expect(budget.heldBy('c')).toBe(32 * 1024)
    s.release()
    expect([budget.inMemory, budget.onDisk, budget.heldBy('c')]).toEqual([0, 0, 0])
    expect(s.add(chunkOf(4))).toBe(false)
  })
})
