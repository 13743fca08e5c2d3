import { execFileSync } from 'node:child_process'
import { createReadStream, mkdtempSync } from 'node:fs'
import { createServer, Socket, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import pino from 'pino'
import { BoomSink, PipeSink, sayDrops } from '../../src/observe/log.js'

// A log reader that falls behind (a stuck shipper) may leave at most a bound queued in the
// gateway: past it lines are dropped and counted, and the count is written once it catches up.

/**
 * The reader catches up: every line it gets is `line` whole, and the last says what was dropped.
 * How many lines were kept, and that last line.
 */
async function catchUp(
  reader: NodeJS.ReadableStream,
  line: string
): Promise<{ kept: number; note: { dropped_lines: number } }> {
  let got = ''
  reader.on('data', (d: string) => (got += d))
  reader.resume()
  await new Promise<void>((r) => {
    const check = () => (got.includes('dropped_lines') ? r() : setTimeout(check, 10))
    check()
  })
  const received = got.trimEnd().split('\n')
  for (const l of received.slice(0, -1)) expect(l).toBe(line.trimEnd())
  return { kept: received.length - 1, note: JSON.parse(received.at(-1)!) }
}

describe('PipeSink: a slow reader holds a bounded queue', () => {
  it('queues at most the bound, drops and counts the rest, and says how many once drained', async () => {
    const held: { reader: Socket | null } = { reader: null }
    const server = createServer((s) => {
      held.reader = s
      s.pause() // reads nothing until told
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const out = new Socket()
    await new Promise<void>((r) =>
      out.connect((server.address() as AddressInfo).port, '127.0.0.1', r)
    )
    while (held.reader === null) await new Promise((r) => setTimeout(r, 5))
    const reader = held.reader
    const bound = 256 * 1024
    const sink = new PipeSink(out, bound)
    sayDrops(pino({ base: null }, sink), sink)
    const line = `${JSON.stringify({ msg: 'request', pad: 'x'.repeat(200) })}\n`
    const lines = 20_000 // about 4.4 MB, far past the bound and the sockets' own buffers
    for (let i = 0; i < lines; i++) sink.write(line)
    expect(out.writableLength).toBeLessThanOrEqual(bound + line.length)
    // The reader catches up: every byte it gets is a whole line; the last says what was dropped.
    reader.setEncoding('utf8')
    const { kept, note } = await catchUp(reader, line)
    expect(note.dropped_lines).toBe(lines - kept)
    expect(note.dropped_lines).toBeGreaterThan(0)
    out.destroy()
    server.close()
  })
})

describe('BoomSink: SonicBoom (a worker, a file) holds a bounded queue too', () => {
  it('past the bound, batches are dropped and counted, and the count is said once the writes catch up', async () => {
    // A FIFO whose reader reads nothing until told: SonicBoom's write waits in the thread pool
    // while lines go on coming. 0.7.7 held them all.
    const fifo = join(mkdtempSync(join(tmpdir(), 'bg-boom-')), 'out')
    execFileSync('mkfifo', [fifo])
    const reader = createReadStream(fifo, { encoding: 'utf8' })
    reader.pause()
    const bound = 256 * 1024
    const sink = BoomSink.to(fifo, 16 * 1024, bound)
    const boom = sink.boom
    await new Promise<void>((r) => boom.once('ready', () => r()))
    sayDrops(pino({ base: null }, sink), sink)
    const line = `${JSON.stringify({ msg: 'request', pad: 'x'.repeat(200) })}\n`
    const batch = line.repeat(10)
    const lines = 20_000
    for (let i = 0; i < lines / 10; i++) sink.write(batch)
    // What waits in the gateway: at most the bound.
    expect((boom as unknown as { _len: number })._len).toBeLessThanOrEqual(bound)
    const { kept, note } = await catchUp(reader, line)
    expect(note.dropped_lines).toBe(lines - kept)
    expect(note.dropped_lines).toBeGreaterThan(lines / 2)
    boom.end()
    reader.destroy()
  })
})
