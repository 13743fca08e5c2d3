import { readFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { INSPECTABLE, liveHeapMb, liveMemory } from '../helpers/live-heap.js'
import { metricOf } from '../helpers/metrics.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'
import { until } from '../helpers/until.js'

// Issue #15 / #20: a 16 MiB body under max_body_bytes is counted as it arrives and held as its
// raw bytes (no parse tree) until it is forwarded whole.

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const rowsPath = `/api-gateway/api/v2/dtables/${U}/rows/`

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(m![1]) / 1024
}

/** A 16 MiB append of 900 rows (under append_rows: it is forwarded whole), streamed in pieces. */
function postBig(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const row = Buffer.from(`{"Name":"${'x'.repeat(18_600)}"},`)
    const rows = 900
    const req = request(
      {
        port,
        method: 'POST',
        path: rowsPath,
        headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      }
    )
    req.on('error', () => resolve(-1))
    req.write('{"table_name":"T","rows":[')
    let i = 0
    const pump = (): void => {
      while (i < rows - 1) {
        i++
        if (!req.write(row)) return void req.once('drain', pump)
      }
      req.end('{}]}')
    }
    pump()
    setTimeout(() => reject(new Error('timeout')), 50_000).unref()
  })
}

describe('size checks with bounded memory (issue #15)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  let bytesSeen = 0
  beforeAll(async () => {
    up = await startStubUpstream()
    up.handle((req, res) => {
      req.on('data', (c: Buffer) => (bytesSeen += c.length))
      req.on('end', () => res.end('{}'))
    })
    gw = await startGateway(testYaml(up.url, 'rate_limits: { base: unlimited }'))
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('10 concurrent 16 MiB bodies: RSS grows by at most 1.3 × the bytes held, and other requests are answered meanwhile', async () => {
    const pid = gw.proc.pid!
    await send(gw.port, { path: `/api-gateway/api/v2/dtables/${U}/metadata/` })
    const before = rssMb(pid)
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 20)
    let answered = 0
    let running = true
    const probe = (async () => {
      while (running) {
        if (
          (await send(gw.port, { path: `/api-gateway/api/v2/dtables/${U}/metadata/` })).status ===
          200
        )
          answered++
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    const statuses = await Promise.all(Array.from({ length: 10 }, () => postBig(gw.port)))
    running = false
    await probe
    clearInterval(sampler)
    expect(statuses).toEqual(Array(10).fill(200))
    expect(bytesSeen).toBeGreaterThan(10 * 16_000_000)
    // SPEC §4: the bodies are held whole before forwarding (~160 MiB under buffer_bytes), as
    // their raw bytes: no parse objects on top.
    const heldMb = bytesSeen / 1024 / 1024
    expect(peak - before).toBeLessThan(1.3 * heldMb)
    // Answered while the bodies come (how fast is the benchmark's to say, issue #42: no timed
    // assertion here; test/heavy/size-latency.test.ts holds the 250 ms in .ci/load).
    expect(answered).toBeGreaterThan(3)
  }, 60_000)

  it('ten 100,000-deep bodies at once: 400 each, RSS grows under 50 MB', async () => {
    const pid = gw.proc.pid!
    const before = rssMb(pid)
    const body = `{"rows":[${'['.repeat(100_000)}${']'.repeat(100_000)}]}`
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        send(gw.port, {
          method: 'POST',
          path: rowsPath,
          headers: { 'content-type': 'application/json' },
          body,
        })
      )
    )
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(400))
    expect(rssMb(pid) - before).toBeLessThan(50)
  })
})

describe('held and streamed bodies take their bytes, however they are cut (SPEC §4)', () => {
  let up: StubUpstream
  let gw: GatewayProcess
  let streamed = 0
  beforeAll(async () => {
    up = await startStubUpstream()
    up.handle((req, res) => {
      req.on('data', (c: Buffer) => (streamed += c.length))
      req.on('end', () => res.end('{}'))
    })
    gw = await startGateway(testYaml(up.url, 'rate_limits: { base: unlimited }'), {
      env: INSPECTABLE,
    })
  })
  afterAll(async () => {
    await gw?.stop()
    await up?.close()
  })

  it('512 KiB of a chunked append sent 1 byte a chunk, and not ended: the live heap grows by under 16 MB', async () => {
    // Node copies each chunk of a chunked body into a Buffer of its own: held as they came, these
    // took some 90 MB of heap (0.7.7), for 512 KiB counted against buffer_bytes.
    const bytes = 512 * 1024
    const before = await liveHeapMb(gw)
    const sock = connect(gw.port, '127.0.0.1')
    sock.write(
      `POST ${rowsPath} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        'Transfer-Encoding: chunked\r\n\r\n1\r\n[\r\n'
    )
    const group = Buffer.from('1\r\n \r\n'.repeat(8192))
    for (let sent = 1; sent < bytes; sent += 8192) sock.write(group)
    try {
      await until(
        'the body held',
        () => metricOf(gw.adminUrl, 'basegate_body_buffered_bytes'),
        (held) => held >= bytes,
        { timeoutMs: 30_000, everyMs: 100 }
      )
      const grown = (await liveHeapMb(gw)) - before
      expect(grown).toBeLessThan(16)
    } finally {
      sock.destroy()
    }
    await until(
      'the body freed',
      () => metricOf(gw.adminUrl, 'basegate_body_buffered_bytes'),
      (held) => held === 0
    )
  }, 60_000)

  it('an upload streamed on past its read-ahead, not ended: what the server took is not kept (64 MiB, under 16 MB more)', async () => {
    // 0.7.7 kept every chunk it had streamed until the body ended (a race against the pace
    // watch held each): a 64 MiB upload held 64 MiB of Buffers.
    const before = await liveMemory(gw)
    const sock = connect(gw.port, '127.0.0.1')
    sock.on('error', () => {})
    sock.write(
      'POST /seafhttp/upload-api/0f1e2d3c HTTP/1.1\r\nHost: x\r\n' +
        'Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n'
    )
    const piece = Buffer.alloc(65_536, 0x61)
    const frame = Buffer.concat([Buffer.from('10000\r\n'), piece, Buffer.from('\r\n')])
    let sent = 0
    await new Promise<void>((resolve) => {
      const pump = (): void => {
        while (sent < 64 * 1024 * 1024) {
          sent += piece.length
          if (!sock.write(frame)) return void sock.once('drain', pump)
        }
        resolve()
      }
      pump()
    })
    try {
      await until(
        'the upload streamed',
        () => streamed,
        (n) => n >= 60 * 1024 * 1024,
        { timeoutMs: 30_000 }
      )
      const after = await liveMemory(gw)
      const grown = after.heapMb + after.arrayBuffersMb - before.heapMb - before.arrayBuffersMb
      expect(grown).toBeLessThan(16)
    } finally {
      sock.destroy()
    }
  }, 60_000)
})
