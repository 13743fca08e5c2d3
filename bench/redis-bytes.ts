import { spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { IncomingMessage } from 'node:http'
import { Socket } from 'node:net'
import { Redis } from 'ioredis'
import { systemClock } from '../src/clock.js'
import { parseConfig } from '../src/config/load.js'
import { createGate } from '../src/http/gate.js'
import { compileSnapshot } from '../src/http/snapshot.js'
import { RedisStore } from '../src/limiter/redis-store.js'
import { RedisUsageStore } from '../src/usage/store.js'
import { RedisShapeStore } from '../src/tuning/shape-store.js'

// `npm run bench:redis-bytes`: what basegate keeps in Redis per subject, measured on a
// redis-server of its own (used_memory before and after, divided by the subjects written), for
// docs/operating.md "Sizing Redis". Nothing here is timed.

const N = Number(process.env.BYTES_SUBJECTS ?? 20_000)

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

function requestOf(url: string): IncomingMessage {
  const socket = new Socket()
  Object.defineProperty(socket, 'remoteAddress', { value: '10.0.0.1' })
  const req = new IncomingMessage(socket)
  req.method = 'GET'
  req.url = url
  req.headers = { host: 'gw' }
  req.rawHeaders = ['host', 'gw']
  return req
}

const uuidOf = (i: number) => `6f1c2a4e-0d3b-4c59-9a51-${i.toString(16).padStart(12, '0')}`

async function main(): Promise<void> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'bg-bytes-'))
  const server = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: 'ignore' }
  )
  const r = new Redis({ port, host: '127.0.0.1', enableAutoPipelining: true, lazyConnect: true })
  for (let i = 0; i < 50; i++) {
    try {
      await r.connect()
      break
    } catch {
      await new Promise((res) => setTimeout(res, 100))
    }
  }
  const used = async () => Number(/used_memory:(\d+)/.exec(await r.info('memory'))![1])
  const rows: string[] = []
  const measure = async (what: string, write: () => Promise<void>, n = N) => {
    await r.flushall()
    const before = await used()
    await write()
    const after = await used()
    const per = (after - before) / n
    rows.push(`| ${what} | ${Math.round(per)} | ${((per * 100_000) / 1e6).toFixed(1)} MB |`)
    process.stdout.write(`${what}: ${per.toFixed(0)} bytes each (${n} written)\n`)
  }
  try {
    const store = new RedisStore(r, { clock: systemClock, prefix: 'bg:' })
    const conf = parseConfig('rate_limits: { base: 500/min }', {})
    if (!conf.ok) throw new Error('config')
    const snap = compileSnapshot(conf.config)
    const gate = createGate({ snapshot: () => snap, store, clock: systemClock })
    await measure('a base’s minute window (one call in it)', async () => {
      for (let i = 0; i < N; i += 500)
        await Promise.all(
          Array.from({ length: Math.min(500, N - i) }, (_, j) =>
            gate(requestOf(`/api-gateway/api/v2/dtables/${uuidOf(i + j)}/rows/`))
          )
        )
    })
    const usage = new RedisUsageStore(r, 'bg:')
    const monthEndMs = Date.parse('2026-12-01T00:00:00Z')
    await measure('a base’s month of days (30 days with calls) and its index entry', async () => {
      for (let d = 1; d <= 30; d++) {
        const day = `2026-11-${String(d).padStart(2, '0')}`
        for (let i = 0; i < N; i += 5000) {
          const counts = new Map<string, number>()
          for (let j = i; j < Math.min(N, i + 5000); j++)
            counts.set(uuidOf(j).replaceAll('-', ''), 100 + d)
          await usage.add(new Map([[day, { monthEndMs, counts }]]), {
            instance: 'b',
            seq: d * 1000 + i,
          })
        }
      }
    })
    // SPEC §11: a key-day of tuning evidence, light (100 calls in a day) and busy (a call in
    // every 5-second bin of 16 hours: the dense hours' encoding).
    const shapes = new RedisShapeStore(r, 'bg:')
    const dayEndMs = Date.parse('2026-11-21T00:00:00Z')
    const family = 'GET /api-gateway/api/v2/dtables/<u>/rows/'
    const shapeWrite = async (
      hoursOf: (i: number) => Map<number, Map<number, number>>,
      n: number
    ) => {
      for (let i = 0; i < n; i += 1000) {
        const series = new Map<
          string,
          {
            total: number
            refusedRate: number
            refusedMonthly: number
            hours: Map<number, Map<number, number>>
          }
        >()
        for (let j = i; j < Math.min(n, i + 1000); j++)
          series.set(`base:${uuidOf(j).replaceAll('-', '')}\t${family}`, {
            total: 1,
            refusedRate: 0,
            refusedMonthly: 0,
            hours: hoursOf(j),
          })
        await shapes.add(new Map([['2026-11-20', { dayEndMs, series }]]), {
          instance: 'b',
          seq: i + 1,
        })
      }
    }
    await measure('a light key-day of tuning evidence (100 calls spread over the day)', () =>
      shapeWrite((j) => {
        const hours = new Map<number, Map<number, number>>()
        for (let c = 0; c < 100; c++) {
          const at = (j * 7919 + c * 863) % (24 * 720)
          const h = Math.floor(at / 720)
          const bins = hours.get(h) ?? new Map<number, number>()
          bins.set(at % 720, (bins.get(at % 720) ?? 0) + 1)
          hours.set(h, bins)
        }
        return hours
      }, N)
    )
    await measure(
      'a busy key-day of tuning evidence (calls in every 5 s of 16 hours)',
      () =>
        shapeWrite(
          () => {
            const hours = new Map<number, Map<number, number>>()
            for (let h = 6; h < 22; h++)
              hours.set(h, new Map(Array.from({ length: 720 }, (_, b) => [b, 3 + (b % 40)])))
            return hours
          },
          Math.min(N, 2000)
        ),
      Math.min(N, 2000)
    )
  } finally {
    r.disconnect()
    server.kill('SIGKILL')
  }
  writeFileSync(
    'bench/results-redis-bytes.md',
    [
      '# Redis bytes per subject',
      '',
      `Measured by \`npm run bench:redis-bytes\` on ${new Date().toISOString().slice(0, 10)}: \`used_memory\` after writing ${N} subjects, less before, over ${N}.`,
      '',
      '| what | bytes each | per 100,000 |',
      '| --- | ---: | ---: |',
      ...rows,
      '',
    ].join('\n')
  )
}

await main()
