import { describe, expect, it } from 'vitest'
import { ChunkGather, gatherStream, KEEP_WHOLE, MAX_BLOCK } from '../../src/size/chunk-gather.js'
import { rng } from '../helpers/rng.js'

// SPEC §4: a held body's memory is its raw bytes, however small the pieces it came in.

/** The memory the kept buffers hold: each distinct allocation once, whole. */
function heldBytes(kept: Buffer[]): number {
  const seen = new Set<ArrayBufferLike>()
  let sum = 0
  for (const b of kept) {
    if (seen.has(b.buffer)) continue
    seen.add(b.buffer)
    sum += b.buffer.byteLength
  }
  return sum
}

/** Pieces of these lengths (each its own allocation, as Node's parser hands them), gathered. */
function gather(lengths: number[], make = (n: number, i: number) => Buffer.alloc(n, i % 251)) {
  const g = new ChunkGather()
  const pieces = lengths.map(make)
  const kept: Buffer[] = []
  for (const p of pieces) g.add(p, (b) => kept.push(b))
  g.seal((b) => kept.push(b))
  return { pieces, kept, bytes: pieces.reduce((s, p) => s + p.length, 0) }
}

describe('ChunkGather', () => {
  it('1-byte pieces: the bytes in order, in a few blocks holding at most twice the bytes', () => {
    const { pieces, kept, bytes } = gather(Array<number>(200_000).fill(1))
    expect(Buffer.concat(kept).equals(Buffer.concat(pieces))).toBe(true)
    expect(kept.length).toBeLessThan(bytes / MAX_BLOCK + 10)
    expect(heldBytes(kept)).toBeLessThanOrEqual(2 * bytes)
  })

  it('large pieces are kept as they came, without a copy', () => {
    const { pieces, kept } = gather([KEEP_WHOLE, 65_536, 3, KEEP_WHOLE + 1])
    expect(kept[0]).toBe(pieces[0])
    expect(kept[1]).toBe(pieces[1])
    expect(kept[2]!.equals(pieces[2]!)).toBe(true)
    expect(kept[3]).toBe(pieces[3])
  })

  it('a large piece that is a view of a larger allocation is copied out of it', () => {
    const big = Buffer.alloc(1 << 20, 7)
    const { kept } = gather([KEEP_WHOLE], (n) => big.subarray(100, 100 + n))
    expect(kept[0]!.equals(big.subarray(100, 100 + KEEP_WHOLE))).toBe(true)
    expect(kept[0]!.buffer.byteLength).toBe(KEEP_WHOLE)
  })

  it('any mix of lengths: the bytes in order, in buffers at least half full, a few for each large piece', () => {
    const rnd = rng(47)
    for (let round = 0; round < 200; round++) {
      const lengths = Array.from({ length: 1 + Math.floor(rnd() * 400) }, () => {
        const r = rnd()
        if (r < 0.5) return Math.floor(rnd() * 8)
        if (r < 0.8) return Math.floor(rnd() * KEEP_WHOLE)
        return KEEP_WHOLE + Math.floor(rnd() * 3 * KEEP_WHOLE)
      })
      const { pieces, kept, bytes } = gather(lengths, (n, i) => {
        const b = Buffer.alloc(n)
        for (let j = 0; j < n; j++) b[j] = (i * 31 + j) & 0xff
        return b
      })
      expect(Buffer.concat(kept).equals(Buffer.concat(pieces))).toBe(true)
      expect(heldBytes(kept)).toBeLessThanOrEqual(2 * bytes)
      expect(kept.every((b) => b.length > 0 && 2 * b.length >= b.buffer.byteLength)).toBe(true)
      const large = lengths.filter((n) => n >= KEEP_WHOLE).length
      expect(kept.length).toBeLessThanOrEqual(8 * (large + 1) + (2 * bytes) / MAX_BLOCK)
    }
  })
})

describe('gatherStream', () => {
  /** A source that hands `lengths` over as Node does a chunked body: each in a tick of its own. */
  async function* ticks(lengths: number[], turns: number[] = []) {
    for (let i = 0; i < lengths.length; i++) {
      // A new turn of the loop before the chunks listed in `turns`.
      if (turns.includes(i)) await new Promise((r) => setImmediate(r))
      else await new Promise<void>((r) => process.nextTick(r))
      yield Buffer.alloc(lengths[i]!, i % 251)
    }
  }
  const all = async (src: AsyncIterable<Buffer>) => {
    const out: Buffer[] = []
    for await (const b of src) out.push(b)
    return out
  }

  it('small chunks of one turn go on together, about a block at most; large ones as they came; every byte in order', async () => {
    const lengths = [...Array<number>(40_000).fill(1), KEEP_WHOLE, 3, 3]
    const want = Buffer.concat(await all(ticks(lengths)))
    const out = await all(gatherStream(ticks(lengths)))
    expect(Buffer.concat(out).equals(want)).toBe(true)
    expect(out.length).toBeLessThanOrEqual(Math.ceil(40_000 / MAX_BLOCK) + 3)
    expect(out.every((b) => b.length < MAX_BLOCK + KEEP_WHOLE)).toBe(true)
    expect(out.some((b) => b.length === KEEP_WHOLE)).toBe(true)
  })

  it('a chunk is not held past its turn: those of the next turn go on apart', async () => {
    const out = await all(gatherStream(ticks([1, 1, 1, 1, 1, 1], [3])))
    expect(out.map((b) => b.length)).toEqual([3, 3])
  })

  it('a reader that stops early stops the source', async () => {
    let returned = false
    async function* endless() {
      try {
        for (;;) yield await Promise.resolve(Buffer.alloc(KEEP_WHOLE))
      } finally {
        returned = true
      }
    }
    for await (const b of gatherStream(endless())) {
      expect(b.length).toBe(KEEP_WHOLE)
      break
    }
    await new Promise((r) => setImmediate(r))
    expect(returned).toBe(true)
  })
})
