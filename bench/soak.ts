import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { createServer as netServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Agent, request } from 'undici'
import { NODE_OPTIONS } from '../src/node-options.js'

// npm run soak: a bounded soak. Mixed traffic for SOAK_SECONDS (default 180) through two
// basegate instances sharing one redis-server; Redis is killed and restarted once, the
// upstream once. Then a report: requests sent, answered, refused, errors, calls admitted over
// a limit (must be 0), and each gateway's memory at the start and the end. Loopback only;
// bounded in time and concurrency.

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SECONDS = Number(process.env.SOAK_SECONDS ?? 180)
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 16)
/** Paced, so most bases stay under their limit and the store is really asked. */
const RPS = Number(process.env.SOAK_RPS ?? 600)
const BASE_LIMIT = 30
const ACCOUNT_LIMIT = 60
const WINDOW_MS = 60_000
const WORK = mkdtempSync(join(tmpdir(), 'basegate-soak-'))
const children: ChildProcess[] = []

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = netServer()
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port
      s.close(() => resolve(p))
    })
  })

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function spawnRedis(port: number): ChildProcess {
  const c = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' }
  )
  children.push(c)
  return c
}

function startGateway(conf: string): Promise<ChildProcess> {
  const c = spawn(process.execPath, [join(ROOT, 'dist/src/main.js'), '--config', conf], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, NODE_OPTIONS, LOG_LEVEL: 'info' },
  })
  children.push(c)
  return new Promise((resolve, reject) => {
    let buf = ''
    c.stdout!.on('data', (d) => {
      buf += d
      if (buf.includes('listening')) {
        c.stdout!.resume()
        resolve(c)
      }
    })
    c.on('exit', (code) => reject(new Error(`gateway exited ${code}`)))
  })
}

function rssMb(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024
}

/** The upstream: answers like the service and records when each base call arrived. */
function upstreamServer(arrivals: Map<string, number[]>): Server {
  return createServer((req, res) => {
    const m = /\/dtables\/([0-9a-f-]{36})\//.exec(req.url ?? '')
    if (m && (req.url ?? '').startsWith('/api-gateway/')) {
      const list = arrivals.get(m[1]!) ?? []
      list.push(Date.now())
      arrivals.set(m[1]!, list)
    }
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"rows":[]}')
    })
  })
}

async function main(): Promise<void> {
  const redisPort = await freePort()
  let redis = spawnRedis(redisPort)
  await sleep(300)
  const upPort = await freePort()
  const arrivals = new Map<string, number[]>()
  let upstream = upstreamServer(arrivals)
  await new Promise<void>((r) => upstream.listen(upPort, '127.0.0.1', r))

  const ports = [await freePort(), await freePort()]
  const gateways: ChildProcess[] = []
  for (const port of ports) {
    const conf = join(WORK, `g${port}.yaml`)
    // on_error: closed, so "admitted over a limit" must be 0 through the Redis outage too
    // (with `open` each instance limits alone while Redis is away, by design).
    writeFileSync(
      conf,
      `listen: { host: 127.0.0.1, port: ${port} }\nadmin: { host: 127.0.0.1, port: 0 }\nupstream: { url: "http://127.0.0.1:${upPort}", timeout_ms: 2000 }\n` +
        `store: { url: "redis://127.0.0.1:${redisPort}", timeout_ms: 100, on_error: closed }\nrate_limits: { base: ${BASE_LIMIT}/min, account: ${ACCOUNT_LIMIT}/min }\n`
    )
    gateways.push(await startGateway(conf))
  }
  await sleep(500)
  const memStart = gateways.map((g) => rssMb(g.pid))

  // 400 bases at an even share (under their limit), and one hot base taking a fifth of the
  // traffic (far over it).
  const bases = Array.from(
    { length: 400 },
    (_, i) => `${(0x50a0 + i).toString(16).padStart(8, '0')}-0d3b-4c59-9a51-3e2d7c8b9a10`
  )
  const agent = new Agent({ connections: CONCURRENCY })
  const counts = {
    sent: 0,
    answered: 0,
    ok: 0,
    refused429: 0,
    status503: 0,
    status502: 0,
    status504: 0,
    status4xx: 0,
    errors: 0,
  }
  const events: string[] = []
  const started = Date.now()
  const deadline = started + SECONDS * 1000
  let n = 0

  async function one(): Promise<void> {
    const i = n++
    const port = ports[i % 2]!
    const base = i % 5 === 0 ? bases[0]! : bases[1 + ((i * 7919) % (bases.length - 1))]!
    const kind = i % 10
    const path =
      kind < 6
        ? `/api-gateway/api/v2/dtables/${base}/rows/?table_name=T&limit=100`
        : kind < 8
          ? `/api/v2.1/dtables/${base}/`
          : kind < 9
            ? '/api2/ping/'
            : `/api-gateway/api/v2/dtables/${base}/sql`
    const method = kind === 9 ? 'POST' : 'GET'
    const body = kind === 9 ? JSON.stringify({ sql: 'SELECT * FROM T LIMIT 50' }) : undefined
    counts.sent++
    try {
      const r = await request(`http://127.0.0.1:${port}${path}`, {
        method,
        body,
        dispatcher: agent,
        headers: body ? { 'content-type': 'application/json' } : {},
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      })
      await r.body.dump()
      counts.answered++
      const s = r.statusCode
      if (s < 300) counts.ok++
      else if (s === 429) counts.refused429++
      else if (s === 503) counts.status503++
      else if (s === 502) counts.status502++
      else if (s === 504) counts.status504++
      else counts.status4xx++
    } catch {
      counts.errors++
    }
  }

  const chaos = (async () => {
    await sleep((SECONDS * 1000) / 3)
    events.push(`${((Date.now() - started) / 1000).toFixed(0)} s: Redis killed`)
    redis.kill('SIGKILL')
    await sleep(10_000)
    redis = spawnRedis(redisPort)
    events.push(`${((Date.now() - started) / 1000).toFixed(0)} s: Redis restarted`)
    await sleep((SECONDS * 1000) / 3 - 10_000)
    events.push(`${((Date.now() - started) / 1000).toFixed(0)} s: upstream stopped`)
    upstream.closeAllConnections()
    await new Promise<void>((r) => upstream.close(() => r()))
    await sleep(5_000)
    upstream = upstreamServer(arrivals)
    await new Promise<void>((r) => upstream.listen(upPort, '127.0.0.1', r))
    events.push(`${((Date.now() - started) / 1000).toFixed(0)} s: upstream restarted`)
  })()

  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      const gapMs = (CONCURRENCY * 1000) / RPS
      while (Date.now() < deadline) {
        const t0 = Date.now()
        await one()
        const rest = gapMs - (Date.now() - t0)
        if (rest > 0) await sleep(rest)
      }
    })
  )
  await chaos
  const memEnd = gateways.map((g) => rssMb(g.pid))
  await agent.close()

  // Admitted over a limit: in any window, more base calls for one base than the limit.
  // Arrival times at the upstream trail the gateway's decisions by a few ms; a 250 ms slack
  // keeps that jitter from looking like a breach.
  let overLimit = 0
  for (const list of arrivals.values()) {
    list.sort((x, y) => x - y)
    let lo = 0
    for (let hi = 0; hi < list.length; hi++) {
      while (list[hi]! - list[lo]! >= WINDOW_MS - 250) lo++
      if (hi - lo + 1 > BASE_LIMIT) overLimit++
    }
  }

  const lines = [
    '# basegate soak',
    '',
    `Run ${new Date().toISOString()}: ${SECONDS} s of mixed traffic (rows, account, exempt, SQL; 400 bases and one hot base) from ${CONCURRENCY} concurrent clients paced at about ${RPS} requests/s, through two instances sharing one redis-server (on_error: closed), base limit ${BASE_LIMIT}/min.`,
    '',
    'Events: ' + events.join('; ') + '.',
    '',
    '| measure | value |',
    '| --- | ---: |',
    `| requests sent | ${counts.sent} |`,
    `| answered | ${counts.answered} |`,
    `| 2xx | ${counts.ok} |`,
    `| refused (429) | ${counts.refused429} |`,
    `| 503 (store down, on_error: closed) | ${counts.status503} |`,
    `| 502 / 504 (upstream down) | ${counts.status502} / ${counts.status504} |`,
    `| other 4xx | ${counts.status4xx} |`,
    `| connection errors | ${counts.errors} |`,
    `| admitted over a limit | ${overLimit} |`,
    `| gateway RSS at start (MB) | ${memStart.map((m) => m.toFixed(1)).join(' / ')} |`,
    `| gateway RSS at end (MB) | ${memEnd.map((m) => m.toFixed(1)).join(' / ')} |`,
  ]
  const md = lines.join('\n') + '\n'
  writeFileSync(join(ROOT, 'bench/soak-results.md'), md)
  process.stdout.write(md)
  if (overLimit > 0 || counts.errors > 0) process.exitCode = 1
}

main()
  .catch((err) => {
    process.stderr.write(`soak failed: ${(err as Error).stack}\n`)
    process.exitCode = 1
  })
  .finally(() => {
    for (const c of children) c.kill('SIGKILL')
    setTimeout(() => process.exit(), 200).unref()
  })
