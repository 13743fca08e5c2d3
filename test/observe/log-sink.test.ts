import { createServer, Socket, type AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import pino from 'pino'
import { PipeSink, sayDrops } from '../../src/observe/log.js'

// A log reader that falls behind (a stuck shipper) may leave at most a bound queued in the
// gateway: past it lines are dropped and counted, and the count is written once it catches up.

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
    let got = ''
    reader.setEncoding('utf8')
    reader.on('data', (d: string) => (got += d))
    reader.resume()
    await new Promise<void>((r) => {
      const check = () => (got.includes('dropped_lines') ? r() : setTimeout(check, 10))
      check()
    })
    const received = got.trimEnd().split('\n')
    const note = JSON.parse(received.at(-1)!)
    const kept = received.length - 1
    expect(note.dropped_lines).toBe(lines - kept)
    expect(note.dropped_lines).toBeGreaterThan(0)
    for (const l of received.slice(0, -1)) expect(l).toBe(line.trimEnd())
    out.destroy()
    server.close()
  })
})
