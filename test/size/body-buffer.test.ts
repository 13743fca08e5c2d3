import type { IncomingMessage } from 'node:http'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { BufferBudget, readHeldBody, type HeldBody } from '../../src/size/body-buffer.js'
import { heldReadOptions } from '../helpers/held.js'
import { rng } from '../helpers/rng.js'

// SPEC §4: memory held for a body is its raw bytes, bounded by buffer_bytes, however the client
// cut it. Node hands a chunked body over chunk by chunk, each a Buffer of its own: 1-byte chunks
// had held some 430 bytes of memory for each byte counted.

/** A request whose body arrives in exactly these pieces, each its own allocation. */
function inPieces(pieces: Buffer[]): IncomingMessage {
  const s = new PassThrough() as PassThrough & { headers: Record<string, string> }
  s.headers = {}
  queueMicrotask(() => {
    for (const p of pieces) s.write(p)
    s.end()
  })
  return s as unknown as IncomingMessage
}

async function hold(pieces: Buffer[], memoryBytes: number) {
  const budget = new BufferBudget()
  const read = await readHeldBody(
    inPieces(pieces),
    heldReadOptions(budget, memoryBytes, mkdtempSync(join(tmpdir(), 'bg-held-')))
  )
  if (read.kind !== 'whole') throw new Error(`read ${read.kind}`)
  return { body: read.body, budget }
}

async function held(body: HeldBody): Promise<Buffer[]> {
  const out: Buffer[] = []
  for await (const c of body.chunks()) out.push(c)
  return out
}

/** Each distinct allocation behind the buffers, whole. */
function memoryOf(bufs: Buffer[]): number {
  const seen = new Set<ArrayBufferLike>()
  let sum = 0
  for (const b of bufs) if (!seen.has(b.buffer)) sum += (seen.add(b.buffer), b.buffer.byteLength)
  return sum
}

const piecesOf = (lengths: number[]) =>
  lengths.map((n, i) => {
    const b = Buffer.allocUnsafeSlow(n)
    for (let j = 0; j < n; j++) b[j] = (i * 7 + j) & 0xff
    return b
  })

describe('a held body cut into small pieces (SPEC §4: its memory is its bytes)', () => {
  it('200,000 1-byte chunks in memory: every byte in order, in a few dozen buffers of at most twice the bytes', async () => {
    const pieces = piecesOf(Array<number>(200_000).fill(1))
    const { body, budget } = await hold(pieces, 1e9)
    const bufs = await held(body)
    expect(Buffer.concat(bufs).equals(Buffer.concat(pieces))).toBe(true)
    expect(bufs.length).toBeLessThan(40)
    expect(memoryOf(bufs)).toBeLessThanOrEqual(2 * 200_000)
    expect(budget.inMemory).toBe(200_000)
    await body.release()
    expect(budget.inMemory).toBe(0)
  })

  it('pieces of every size across the move to a temporary file: byte for byte, whatever the memory', async () => {
    const rnd = rng(4711)
    for (const memory of [0, 1, 700, 5000, 40_000]) {
      const lengths = Array.from({ length: 3000 }, () =>
        rnd() < 0.9 ? Math.floor(rnd() * 20) : Math.floor(rnd() * 9000)
      )
      const pieces = piecesOf(lengths)
      const { body } = await hold(pieces, memory)
      const want = Buffer.concat(pieces)
      expect(body.spilled).toBe(want.length > memory)
      expect(Buffer.concat(await held(body)).equals(want)).toBe(true)
      // slice reads the same bytes, the last small pieces included.
      expect((await body.slice(want.length - 100, want.length)).equals(want.subarray(-100))).toBe(
        true
      )
      await body.release()
    }
  })
})
