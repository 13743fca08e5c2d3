import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { useLive } from '../../helpers/live.js'

// SPEC §4 and §9 (the server is protected as a whole): a body sent in 1-byte chunks reaches the
// server in blocks. Node hands a chunked body over a chunk at a time; 0.7.7 passed each on as it
// came, a write to the server for every byte (7.8 µs of CPU for 6 bytes of the client's).

describe('an upload in 1-byte chunks streams on in blocks', () => {
  let events = 0
  let bytes = 0
  const live = useLive(
    (up) =>
      testYaml(up.url, 'rate_limits: { other: unlimited }').replace(
        /^upstream: .*$/m,
        `upstream: { url: "${up.url}", buffer_request_bytes: 1024 }`
      ),
    {
      upstream: (up) =>
        up.handle((req: IncomingMessage, res: ServerResponse) => {
          req.on('data', (c: Buffer) => {
            events++
            bytes += c.length
          })
          req.on('end', () => res.end('{}'))
        }),
    }
  )

  it('256 KiB past its read-ahead, 1 byte a chunk: every byte reaches the server, in a few hundred pieces', async () => {
    const size = 256 * 1024
    const sock = connect(live.gw.port, '127.0.0.1')
    let answer = ''
    sock.on('data', (d: Buffer) => (answer += d.toString('latin1')))
    const closed = new Promise<void>((r) => sock.once('close', () => r()))
    sock.write(
      'POST /seafhttp/upload-api/0f1e2d3c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n' +
        'Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n'
    )
    const group = Buffer.from('1\r\nz\r\n'.repeat(8192))
    for (let sent = 0; sent < size; sent += 8192) sock.write(group)
    sock.write('0\r\n\r\n')
    await closed
    expect(answer).toMatch(/^HTTP\/1\.1 200/)
    expect(bytes).toBe(size)
    // Each a write of the gateway's (and a read of the server's) on 0.7.7: 262,144 of them.
    expect(events).toBeLessThan(size / 256)
  }, 30_000)
})
