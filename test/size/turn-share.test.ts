import type { IncomingMessage } from 'node:http'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import {
  BufferBudget,
  readHeldBody,
  type BodyRead,
  type HeldBody,
} from '../../src/size/body-buffer.js'
import { TurnShare } from '../../src/size/turn-share.js'
import { heldReadOptions } from '../helpers/held.js'

// SPEC §4: a turn of the loop reads a bounded share of body bytes, so a small call is not
// kept waiting behind large uploads that arrive at once (the heavy test
// test/heavy/size-latency.test.ts times it through the gateway; here the bound itself).

const CHUNK = 4096

/** A request stream whose bytes are all there at once (as sockets that delivered a burst). */
function burst(body: Buffer) {
  const s = new PassThrough({ highWaterMark: CHUNK }) as PassThrough & {
    headers: Record<string, string>
  }
  s.headers = {}
  queueMicrotask(() => {
    for (let i = 0; i < body.length; i += CHUNK) s.write(body.subarray(i, i + CHUNK))
    s.end()
  })
  return s as unknown as IncomingMessage
}

/** Turns of the loop, counted by a chain of setImmediate (the check phase ends each turn). */
function turnCounter() {
  const c = { turn: 0, running: true }
  const tick = () => {
    c.turn++
    if (c.running) setImmediate(tick)
  }
  setImmediate(tick)
  return c
}

async function bytesOf(body: HeldBody): Promise<Buffer> {
  const out: Buffer[] = []
  for await (const c of body.chunks()) out.push(c)
  return Buffer.concat(out)
}

/** Reads `bodies` at once, with `share`; what each read held, and the bytes read in each turn. */
async function readAll(bodies: Buffer[], share: TurnShare, memoryBytes = 1e9) {
  const budget = new BufferBudget()
  const turns = turnCounter()
  const perTurn = new Map<number, number>()
  const dir = mkdtempSync(join(tmpdir(), 'bg-turns-'))
  const reads = await Promise.all(
    bodies.map((b) =>
      readHeldBody(burst(b), {
        ...heldReadOptions(budget, memoryBytes, dir),
        onChunk: (c) => {
          perTurn.set(turns.turn, (perTurn.get(turns.turn) ?? 0) + c.length)
          return true
        },
        turns: share,
      })
    )
  )
  turns.running = false
  return { reads, most: Math.max(...perTurn.values()), turns: perTurn.size }
}

const bodyOf = (n: number, seed: number) => Buffer.alloc(n, String.fromCharCode(97 + seed))

describe('TurnShare (SPEC §4: body bytes a turn of the loop reads)', () => {
  it('says when a turn has had its share, and resumes the waiting in the next, in order', async () => {
    const share = new TurnShare(100)
    expect(share.take(60)).toBe(true)
    expect(share.take(40)).toBe(true)
    expect(share.take(1)).toBe(false)
    const order: string[] = []
    share.next(() => order.push('first'))
    share.next(() => order.push('second'))
    expect(order).toEqual([])
    await new Promise((r) => setImmediate(r))
    expect(order).toEqual(['first', 'second'])
    // A new turn, a new share.
    expect(share.usedThisTurn).toBe(0)
    expect(share.take(100)).toBe(true)
  })

  it('four 1 MiB bodies arriving at once: no turn reads more than the share and a chunk a reader, and every byte is held', async () => {
    const bodies = [0, 1, 2, 3].map((i) => bodyOf(1024 * 1024, i))
    const bounded = await readAll(bodies, new TurnShare(64 * 1024))
    // What a reader may read past the share: the chunk that spent it, and what its stream had
    // already buffered when it paused.
    expect(bounded.most).toBeLessThanOrEqual(64 * 1024 + 4 * 2 * CHUNK)
    expect(bounded.turns).toBeGreaterThanOrEqual((4 * 1024 * 1024) / (64 * 1024 + 8 * CHUNK))
    for (let i = 0; i < 4; i++) {
      const r = bounded.reads[i]!
      expect(r.kind).toBe('whole')
      expect(
        (await bytesOf((r as Extract<BodyRead, { kind: 'whole' }>).body)).equals(bodies[i]!)
      ).toBe(true)
    }
    // Unbounded, the same bodies are read in far bigger turns: the bound is what keeps them small.
    const unbounded = await readAll(bodies, new TurnShare(Infinity))
    expect(unbounded.most).toBeGreaterThan(4 * (64 * 1024 + 8 * CHUNK))
  })

  it('a body spilling to disk while it waits for the next turn is held whole, byte for byte', async () => {
    const bodies = [0, 1].map((i) => bodyOf(512 * 1024, i))
    // 64 KiB of memory in all: most of both bodies go to temporary files, chunk by chunk.
    const { reads } = await readAll(bodies, new TurnShare(16 * 1024), 64 * 1024)
    for (let i = 0; i < 2; i++) {
      const r = reads[i] as Extract<BodyRead, { kind: 'whole' }>
      expect(r.kind).toBe('whole')
      expect(r.body.spilled).toBe(true)
      expect((await bytesOf(r.body)).equals(bodies[i]!)).toBe(true)
      await r.body.release()
    }
  })
})
