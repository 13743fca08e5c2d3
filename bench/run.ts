import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { availableParallelism, tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { JsonBodyScanner } from '../src/size/json-count.js'
import { sqlRowLimit } from '../src/size/sql-limit.js'
import { formFields } from '../src/size/form-fields.js'
import type { HeldBody } from '../src/size/body-buffer.js'
import { GuardedStore } from '../src/limiter/guarded-store.js'
import { keys } from '../src/limiter/keys.js'
import { LeasingStore } from '../src/limiter/leases.js'
import { MemoryStore } from '../src/limiter/memory-store.js'
import { RedisStore } from '../src/limiter/redis-store.js'
import type { Charge, OverrideConfig } from '../src/types.js'
import { parseConfig } from '../src/config/load.js'
import { compileSnapshot } from '../src/http/snapshot.js'
import { systemClock } from '../src/clock.js'
import { NODE_OPTIONS } from '../src/node-options.js'

// npm run bench: every row measured in one run, interleaved round by round, so the ratios
// compare like with like on a shared, noisy machine. Loopback only; every run is bounded.
//
//   BENCH_SECONDS   seconds per measurement (default 5)
//   BENCH_ROUNDS    rounds per scenario; the median is reported (default 3)
//   BENCH_CONNS     concurrent connections (default 50)
//   BENCH_ONLY      scenarios to run, comma-separated (e.g. append); the table then goes to
//                   bench/results-<names>.md, leaving the full run's results.md alone
//   BENCH_PIN       1 (the default with two cores or more and taskset): the load generator
//                   alone on core 0, every server (gateways, peers, upstream, Redis) on the
//                   others, so the load does not take CPU from what it measures; 0: unpinned
//   BENCH_BASELINE  an older build's dist/src/main.js: a row of the tables, and after them
//                   this build and that one loaded at once (bench/pair.sh) for the rotating,
//                   flood and append calls, the figure that holds on a noisy box

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const DIST = join(ROOT, 'dist')
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONNS = Number(process.env.BENCH_CONNS ?? 50)
const ONLY = process.env.BENCH_ONLY?.split(',').filter((x) => x !== '')
const WORK = mkdtempSync(join(tmpdir(), 'basegate-bench-'))
const children: ChildProcess[] = []
const CORES = availableParallelism()
const PIN =
  (process.env.BENCH_PIN ?? (CORES >= 2 ? '1' : '0')) === '1' &&
  spawnSync('taskset', ['-V']).error === undefined
/** Where the servers run when pinned: every core but the load generator's. */
const SERVER_CORES = `1-${CORES - 1}`

/** A command, on the servers' cores when pinned. */
function pinned(cmd: string, args: string[]): [string, string[]] {
  return PIN ? ['taskset', ['-c', SERVER_CORES, cmd, ...args]] : [cmd, args]
}

interface Sample {
  /** CPU time the target's process spent per request (user + system), in microseconds. */
  cpuUsPerReq: number
  rps: number
  p50: number
  p99: number
  requests: number
  non2xx: number
  evalPerReq: number
  cmdsPerReq: number
  /** Redis CPU in scripts (EVAL/EVALSHA usec, inner commands included) per request. */
  redisUsPerReq: number
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer()
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port
      s.close(() => resolve(p))
    })
  })
}

/** basegate runs as the image starts it (its NODE_OPTIONS, src/node-options.ts); the peers as their READMEs do. */
const SHIPPED: NodeJS.ProcessEnv = { NODE_OPTIONS }

function start(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  port?: number
): Promise<ChildProcess> {
  // taskset execs the command: the child's pid is the server's own (its CPU is read by pid).
  const child = spawn(...pinned(cmd, args), {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  children.push(child)
  return new Promise((resolve, reject) => {
    let buf = ''
    const ready = () => {
      child.stdout!.off('data', onData)
      child.stdout!.resume() // discard the rest (the gateway's request log lines)
      resolve(child)
    }
    const onData = (d: Buffer) => {
      buf += d.toString()
      if (buf.includes('listening')) ready()
    }
    child.stdout!.on('data', onData)
    // A server that logs nothing at its level (LOG_LEVEL=error) is up when its port accepts.
    if (port !== undefined) void whenAccepting(port, child).then(ready, () => {})
    child.on('exit', (code) => reject(new Error(`${cmd} ${args.join(' ')} exited ${code}`)))
    // Generous: under pinning a dozen servers boot on one core of a slow machine.
    setTimeout(() => reject(new Error(`${cmd} ${args.join(' ')} did not start`)), 90_000).unref()
  })
}

/** Resolves once `port` accepts a connection, polling while `child` runs. */
async function whenAccepting(port: number, child: ChildProcess): Promise<void> {
  while (child.exitCode === null && child.signalCode === null) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1')
      s.once('connect', () => (s.destroy(), resolve(true)))
      s.once('error', () => resolve(false))
    })
    if (ok) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('exited')
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
    setTimeout(() => child.kill('SIGKILL'), 12_000).unref()
  })
}

function ensureWrk(): boolean {
  if (spawnSync('wrk', ['-v']).error === undefined) return true
  process.stderr.write('wrk not found: installing Debian package wrk\n')
  const r = spawnSync(
    'sh',
    ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk'],
    { stdio: 'inherit' }
  )
  return r.status === 0 && spawnSync('wrk', ['-v']).error === undefined
}

function toMs(text: string): number {
  const m = /([\d.]+)(us|ms|s)/.exec(text)!
  const v = Number(m[1])
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v
}

async function commandStats(
  redis: Redis
): Promise<{ evals: number; all: number; evalUsec: number }> {
  const info = await redis.info('commandstats')
  let evals = 0
  let all = 0
  let evalUsec = 0
  for (const m of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/g)) {
    const name = m[1]!
    if (name === 'info') continue
    all += Number(m[2])
    if (name === 'evalsha' || name === 'eval') {
      evals += Number(m[2])
      evalUsec += Number(m[3])
    }
  }
  return { evals, all, evalUsec }
}

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100)

/** user + system CPU seconds of a process, from /proc (Linux). */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const own = (Number(fields[11]) + Number(fields[12])) / CLK_TCK
    // A primary's workers are its children: a `workers: N` row counts them all.
    return childPids(pid).reduce((sum, c) => sum + cpuSeconds(c), own)
  } catch {
    return NaN
  }
}

function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .split(' ')
      .filter((x) => x.trim() !== '')
      .map(Number)
  } catch {
    return []
  }
}

async function measure(
  url: string,
  script: string,
  redis: Redis,
  useWrk: boolean,
  seconds = SECONDS,
  pid?: number
): Promise<Sample> {
  const before = await commandStats(redis)
  const cpuBefore = cpuSeconds(pid)
  let rps: number, p50: number, p99: number, requests: number, non2xx: number
  if (useWrk) {
    const wrk = ['wrk', '-t1', `-c${CONNS}`, `-d${seconds}s`, '--latency', '-s', script, url]
    const out = execFileSync(PIN ? 'taskset' : 'wrk', PIN ? ['-c', '0', ...wrk] : wrk.slice(1), {
      encoding: 'utf8',
      timeout: (seconds + 30) * 1000,
    })
    rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1])
    p50 = toMs(/ 50%\s+(\S+)/.exec(out)![1]!)
    p99 = toMs(/ 99%\s+(\S+)/.exec(out)![1]!)
    requests = Number(/(\d+) requests in/.exec(out)![1])
    non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0)
  } else {
    const autocannon = (await import('autocannon')).default
    const r = await autocannon({
      url,
      connections: CONNS,
      duration: seconds,
      requests: [{ path: script }],
    })
    rps = r.requests.average
    p50 = r.latency.p50
    p99 = r.latency.p99
    requests = r.requests.total
    non2xx = r.non2xx
  }
  const after = await commandStats(redis)
  return {
    cpuUsPerReq: ((cpuSeconds(pid) - cpuBefore) * 1e6) / requests,
    rps,
    p50,
    p99,
    requests,
    non2xx,
    evalPerReq: (after.evals - before.evals) / requests,
    cmdsPerReq: (after.all - before.all) / requests,
    redisUsPerReq: (after.evalUsec - before.evalUsec) / requests,
  }
}

/**
 * Issue #14: latency when not saturated: autocannon at a fixed overall rate (it corrects for
 * coordinated omission), 1,000 rotating bases, CONNS connections.
 */
async function fixedRate(
  url: string,
  rate: number,
  seconds: number
): Promise<{ rps: number; p50: number; p99: number }> {
  const autocannon = (await import('autocannon')).default
  let n = 0
  const r = await autocannon({
    url,
    connections: CONNS,
    duration: seconds,
    overallRate: rate,
    requests: [
      {
        setupRequest: (req) => {
          const uuid = ((n++ % 1000) + 1).toString(16).padStart(8, '0')
          return {
            ...req,
            path: `/api-gateway/api/v2/dtables/${uuid}-0d3b-4c59-9a51-3e2d7c8b9a10/rows/?table_name=Table1`,
          }
        },
      },
    ],
  })
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99 }
}

/**
 * SPEC §12 "not slower than the release before", read where it holds on a noisy box: this build
 * and another loaded at once (bench/pair.sh, 10 rounds of 4 s each), scenario by scenario, the
 * medians of the rounds' ratios. The other is the baseline build (BENCH_BASELINE), or `floor`
 * (bench/floor.js, the one-trip floor). The interleaved table loads one row at a time, and a
 * box whose speed moves between rows moves the table's ratios with it (a flood row's rounds
 * read 0.65 to 1.18 against the baseline in one run of 0.7.9's).
 */
function paired(base: string, names: readonly string[], noLines = false): string[] {
  const against = base === 'floor' ? 'the one-trip floor' : 'the baseline'
  const build = noLines ? 'this build writing no request lines (LOG_LEVEL=error)' : 'this build'
  const lines = [
    `## ${build} against ${against}, both loaded at once (\`bench/pair.sh\`: 10 rounds of 4 s, medians of the rounds' ratios, this build / ${against})`,
    '',
    '| scenario | calls a second | CPU µs a call |',
    '| --- | ---: | ---: |',
  ]
  for (const name of names) {
    const r = spawnSync('bash', [join(ROOT, 'bench/pair.sh')], {
      env: {
        ...process.env,
        BASE: base === 'floor' ? base : resolve(base),
        SCENARIO: name,
        ROUNDS: '10',
        SECS: '4',
        ...(noLines ? { CUR_LOG_LEVEL: 'error' } : {}),
      },
      encoding: 'utf8',
    })
    const m = /calls a second ([\d.]+), CPU a call ([\d.]+)/.exec(r.stdout ?? '')
    const what = noLines ? `${name}, no request lines` : name
    process.stderr.write(`paired ${what} (${against}): ${m?.[0] ?? `failed: ${r.stderr}`}\n`)
    lines.push(`| ${name} | ${m?.[1] ?? 'failed'} | ${m?.[2] ?? 'failed'} |`)
  }
  return lines
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

function wrkScript(name: string, lua: string): string {
  const f = join(WORK, `${name}.lua`)
  writeFileSync(f, lua)
  return f
}

/** A wrk script that sends List Rows to `bases` base UUIDs in turn. */
const rotatingLua = (bases: number) => `
local uuids = {}
for i = 1, ${bases} do uuids[i] = string.format("%08x-0d3b-4c59-9a51-3e2d7c8b9a10", i) end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api-gateway/api/v2/dtables/" .. uuids[(n % ${bases}) + 1] .. "/rows/?table_name=Table1")
end
`
const ROTATING_LUA = rotatingLua(1000)
// A 1,000-row append (the largest append_rows allows): the body is read, parsed and counted.
const APPEND_ROWS = Array.from(
  { length: 1000 },
  (_, i) => `{"Name":"row ${i}","Count":${i},"Done":false}`
).join(',')
const APPEND_BODY = `{"table_name":"Table1","rows":[${APPEND_ROWS}],"apply_default":false}`
const APPEND_LUA = `
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '${APPEND_BODY}'
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, string.format("/api-gateway/api/v2/dtables/%08x-0d3b-4c59-9a51-3e2d7c8b9a10/rows/", (n % 1000) + 1))
end
`
// The same bytes to a base path with no size check: what the scan of the rows costs is the
// difference between this row and basegate's (issue #15: at least 0.8×).
const APPEND_UNCHECKED_LUA = APPEND_LUA.replace('/rows/', '/rows-unchecked/')
const FLOOD_PATH =
  '/api-gateway/api/v2/dtables/ffffffff-0d3b-4c59-9a51-3e2d7c8b9a10/rows/?table_name=Table1'
const HOT_LUA = `request = function() return wrk.format("GET", "/api-gateway/api/v2/dtables/eeeeeeee-0d3b-4c59-9a51-3e2d7c8b9a10/rows/?table_name=Table1") end`
const FLOOD_LUA = `request = function() return wrk.format("GET", "${FLOOD_PATH}") end`
// Issue #14: 100 hot bases, every call admitted (where leases pay).
const HOT100_LUA = rotatingLua(100)

interface Target {
  name: string
  url: string
  pid?: number
  /** A wrk script of its own (else the scenario's). */
  script?: string
}

/** A ~1 MB append of 1,000 rows (the largest append_rows allows). */
const ONE_MB_BODY = `{"table_name":"Table1","rows":[${Array.from({ length: 1000 }, (_, i) => `{"Name":"row ${i}","Notes":"${'n'.repeat(1000)}"}`).join(',')}]}`

/**
 * Issue #20: the latency a checked body's buffering adds. One client, one call at a time, a
 * 1 MB body: the direct call, this build (read whole, then forwarded), the same bytes on an
 * unchecked path (streamed), and BENCH_BASELINE (the streaming counter of 0.4.0), interleaved.
 */
async function oneMbLatency(targets: Target[]): Promise<string[]> {
  const { Agent, request } = await import('undici')
  const agent = new Agent({ connections: 1 })
  const rows: { name: string; url: string; path: string }[] = []
  const base = '/api-gateway/api/v2/dtables/0000abcd-0d3b-4c59-9a51-3e2d7c8b9a10/'
  for (const t of targets) {
    if (t.name === 'direct' || t.name === 'basegate' || t.name === 'basegate-baseline')
      rows.push({ name: t.name, url: t.url, path: base + 'rows/' })
    if (t.name === 'basegate')
      rows.push({ name: 'basegate-unchecked', url: t.url, path: base + 'rows-unchecked/' })
  }
  const ms: Record<string, number[]> = {}
  for (let round = 0; round < 8; round++) {
    for (const r of rows) {
      for (let i = 0; i < 40; i++) {
        const t0 = performance.now()
        const res = await request(r.url + r.path, {
          method: 'POST',
          body: ONE_MB_BODY,
          headers: { 'content-type': 'application/json' },
          dispatcher: agent,
        })
        await res.body.dump()
        if (round > 0) (ms[r.name] ??= []).push(performance.now() - t0)
      }
    }
  }
  await agent.close()
  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)]!
  const out = [
    `## one 1 MB append at a time (${ONE_MB_BODY.length} bytes, 1,000 rows; 280 calls per row, interleaved)`,
    '',
    '| target | p50 ms | p99 ms | p50 vs direct |',
    '| --- | ---: | ---: | ---: |',
  ]
  for (const [name, xs] of Object.entries(ms)) {
    out.push(
      `| ${name} | ${pct(xs, 0.5).toFixed(2)} | ${pct(xs, 0.99).toFixed(2)} | +${(pct(xs, 0.5) - pct(ms.direct!, 0.5)).toFixed(2)} ms |`
    )
  }
  return out
}

/** µs per call of a function, after a warm-up, in this process. */
function usPerCall(fn: () => unknown, n: number): number {
  for (let i = 0; i < Math.min(n, 2000); i++) fn()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) fn()
  return ((performance.now() - t0) / n) * 1000
}

/** Issue #15: what each size check costs in process (the SQL target: under 20 µs for 1 KB). */
/**
 * SPEC §10: what classification costs with 1,000 overrides configured (500 naming bases, 400
 * teams of 1 base, 100 client networks) against none, on 1,000 rotating bases of which a tenth
 * are named: 9 interleaved rounds, the fastest of each.
 */
function overrideCosts(): string[] {
  const base = parseConfig('', {})
  if (!base.ok) throw new Error('the default config does not load')
  const hex = (n: number) => n.toString(16).padStart(8, '0')
  const uuidOf = (n: number) => `${hex(n)}-0d3b-4c59-9a51-3e2d7c8b9a10`
  const teams = Array.from({ length: 400 }, (_, i) => ({
    id: `t${i}`,
    plan: 'free',
    users: 1,
    bases: [uuidOf(5000 + i).replace(/-/g, '')],
  }))
  const overrides: OverrideConfig[] = Array.from({ length: 1000 }, (_, i) => ({
    name: `o${i}`,
    bases: i < 500 ? [uuidOf(i * 2).replace(/-/g, '')] : [],
    teams: i >= 500 && i < 900 ? [`t${i - 500}`] : [],
    clients: i >= 900 ? [`10.${i - 900}.0.0/16`] : [],
    limits: { base: [{ limit: 1000, windowMs: 60_000, text: '1000/min' }] },
    shared: false,
    mode: 'enforce',
  }))
  const config = { ...base.config, monthly: { ...base.config.monthly, teams } }
  const none = compileSnapshot(config).classifier
  const many = compileSnapshot({ ...config, overrides }).classifier
  const paths = Array.from(
    { length: 1000 },
    (_, i) => `/api-gateway/api/v2/dtables/${uuidOf(i * 20)}/rows/`
  )
  let k = 0
  const run = (c: typeof none) => () =>
    c.classify('GET', paths[k++ % 1000]!, '192.0.2.1', 1_800_000_000_000, '192.0.2.1')
  const a: number[] = []
  const b: number[] = []
  for (let round = 0; round < 9; round++) {
    a.push(usPerCall(run(none), 200_000))
    b.push(usPerCall(run(many), 200_000))
  }
  // The fastest round of each: on a shared machine noise only ever adds time.
  const best = (xs: number[]) => Math.min(...xs)
  return [
    '## classification with overrides (SPEC §10), in process',
    '',
    '| overrides configured | µs per call | vs none |',
    '| --- | ---: | ---: |',
    `| none | ${best(a).toFixed(3)} | 1.00 |`,
    `| 1,000 (500 bases, 400 teams, 100 client networks) | ${best(b).toFixed(3)} | ${(best(b) / best(a)).toFixed(2)} |`,
  ]
}

/** Async calls' mean cost in microseconds, run one after another. */
async function usPerAsyncCall(fn: () => Promise<unknown>, n: number): Promise<number> {
  for (let i = 0; i < Math.min(n, 200); i++) await fn()
  const t0 = performance.now()
  for (let i = 0; i < n; i++) await fn()
  return ((performance.now() - t0) / n) * 1000
}

/**
 * SPEC §4 size checks in process (issues #15, #47): the SQL LIMIT reader, the JSON row counter
 * on a 43 KB 1,000-row append and a multipart `sql` form as dtable-web-api's querySql posts it;
 * each the fastest of 5 rounds, with the bytes a second it reads.
 */
async function checkCosts(): Promise<string[]> {
  let sql =
    "SELECT Name, hours(Start, End), COUNT(*) FROM `Table 1` WHERE Tags HAS ANY OF ('a','b') AND Name ILIKE '%x%' /* c */ "
  while (sql.length < 1000) sql += "AND Owner = 'somebody' "
  sql += 'GROUP BY Name ORDER BY Name LIMIT 500'
  const body = Buffer.from(APPEND_BODY)
  const boundary = '----basegate-bench-7f3a'
  const form = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="sql"\r\n\r\n${sql}\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="convert_keys"\r\n\r\ntrue\r\n` +
      `--${boundary}--\r\n`
  )
  const heldOf = (bytes: Buffer): HeldBody => ({
    length: bytes.length,
    spilled: false,
    chunks: () => [bytes],
    slice: async (a, b) => bytes.subarray(a, b),
    release: async () => {},
  })
  const held = heldOf(form)
  // The same form with a part header only busboy reads (a per-part content type).
  const typedForm = Buffer.from(
    form
      .toString('latin1')
      .replace('name="sql"\r\n', 'name="sql"\r\nContent-Type: text/plain; charset=utf-8\r\n'),
    'latin1'
  )
  const typedHeld = heldOf(typedForm)
  const best = async (f: () => number | Promise<number>) => {
    let m = Infinity
    for (let r = 0; r < 5; r++) m = Math.min(m, await f())
    return m
  }
  const sqlUs = await best(() => usPerCall(() => sqlRowLimit(sql, []), 20000))
  // A statement too long to read in every dialect (test/size/sql-limit.test.ts: one pass; a
  // reading that went over it several times once took 20 s).
  const long = `SELECT * FROM T WHERE Name = 'a\\' LIMIT 50000 -- ' AND a IN (${"'x\\\\', 1--1, ".repeat(40_000)}1) LIMIT 5`
  const longUs = await best(() => usPerCall(() => sqlRowLimit(long, []), 5))
  const count = (b: Buffer, chunk: number) => {
    const c = new JsonBodyScanner({ count: 'rows' })
    for (let o = 0; o < b.length; o += chunk) c.write(b.subarray(o, o + chunk))
    return c.end()
  }
  // A gateway's counter has met rows cut by a chunk's end long before: read them first, as it
  // has (0.7.6 and older read every byte after such a row at a fraction of the speed).
  for (let k = 0; k < 200; k++) count(body, 1000)
  const scan = await best(() => usPerCall(() => count(body, body.length), 2000))
  // Rows with an 18 KB text cell each, 16 MB in the 64 KiB chunks a socket reads.
  const cell = 'lorem ipsum dolor sit amet, '.repeat(650)
  const longRows = Buffer.from(
    `{"table_name":"Table1","rows":[${Array.from({ length: 900 }, (_, i) => `{"Name":"row ${i}","Notes":"${cell}","Count":${i}}`).join(',')}]}`
  )
  const longUsJson = await best(() => usPerCall(() => count(longRows, 65536), 5))
  const parse = await best(() =>
    usPerCall(() => JSON.parse(body.toString('utf8')).rows.length, 2000)
  )
  const readForm = (h: HeldBody) => async () => {
    const fields = await formFields(h, `multipart/form-data; boundary=${boundary}`, ['sql'])
    if (fields instanceof Map) return sqlRowLimit(fields.get('sql')![0]!, [])
    throw new Error(fields.error)
  }
  const multipart = await best(() => usPerAsyncCall(readForm(held), 2000))
  const multipartBusboy = await best(() => usPerAsyncCall(readForm(typedHeld), 2000))
  const mbs = (bytes: number, us: number) => (bytes / us).toFixed(0)
  return [
    '## size checks in process',
    '',
    '| check | bytes | µs per call | MB/s |',
    '| --- | ---: | ---: | ---: |',
    `| SQL LIMIT reader, ${sql.length}-character statement | ${sql.length} | ${sqlUs.toFixed(1)} | ${mbs(sql.length, sqlUs)} |`,
    `| SQL LIMIT reader, a ${long.length.toLocaleString('en-US')}-character statement (strict: one pass) | ${long.length} | ${longUs.toFixed(0)} | ${mbs(long.length, longUs)} |`,
    `| JSON row counter, 1,000-row append (streaming scanner, after rows cut by a chunk) | ${body.length} | ${scan.toFixed(1)} | ${mbs(body.length, scan)} |`,
    `| JSON row counter, 900 rows of an 18 KB text cell each, in 64 KiB chunks | ${longRows.length} | ${longUsJson.toFixed(0)} | ${mbs(longRows.length, longUsJson)} |`,
    `| the same body through JSON.parse (before issue #15), for comparison | ${body.length} | ${parse.toFixed(1)} | ${mbs(body.length, parse)} |`,
    `| multipart form (querySql's \`sql\` and \`convert_keys\`): fields read, then the LIMIT reader | ${form.length} | ${multipart.toFixed(1)} | ${mbs(form.length, multipart)} |`,
    `| the same with a per-part content type (read by @fastify/busboy), then the LIMIT reader | ${typedForm.length} | ${multipartBusboy.toFixed(1)} | ${mbs(typedForm.length, multipartBusboy)} |`,
  ]
}

/**
 * A build's check script as it registers it (its redis-store.js's CHECK) and the arguments it
 * sends for one plain window: the short form where the build has one (check-short.lua, 0.7.6),
 * else the long form of its own layout (check.lua's FIRST and PER_WINDOW: 3 + 7 in 0.6.0, 4 + 8
 * in 0.7.x). Null for a build older than that export.
 */
async function checkScriptOf(
  limiterDir: string
): Promise<{ text: string; args: (string | number)[] } | null> {
  const mod = (await import(join(limiterDir, 'redis-store.js'))) as { CHECK?: string }
  if (typeof mod.CHECK !== 'string') return null
  const has = (file: string) => {
    try {
      return readFileSync(join(limiterDir, 'lua', file), 'utf8')
    } catch {
      return null
    }
  }
  if (has('check-short.lua') !== null) return { text: mod.CHECK, args: [50, 10_000_000, 0, 60_000] }
  const check = has('check.lua') ?? ''
  const first = Number(/local FIRST = (\d+)/.exec(check)?.[1])
  const per = Number(/local PER_WINDOW = (\d+)/.exec(check)?.[1])
  if (!(first >= 4 && per >= 7)) return null
  // buckets, peek 0, deadline 0 (and the tag 0 from 0.7.0), then limit, window, and zeros, the
  // day '' (the seventh of a window's arguments).
  const window = Array.from({ length: per }, (_, i) => (i === 6 ? '' : 0)) as (string | number)[]
  window[0] = 10_000_000
  window[1] = 60_000
  return { text: mod.CHECK, args: [50, ...Array(first - 2).fill(0), ...window] }
}

/**
 * Redis time (commandstats) of one EVALSHA of a build's check script: on keys seen for the
 * first time (the bucket opens: a write and an expiry), or on one key whose bucket is open
 * (the steady state of a busy key). Null when the build has no script to measure this way.
 */
async function scriptUs(redis: Redis, limiterDir: string, fresh: boolean): Promise<number | null> {
  const script = await checkScriptOf(limiterDir)
  if (script === null) return null
  const sha = (await redis.script('LOAD', script.text)) as string
  const base = `bench-script:{b:${limiterDir.length}-${Math.random()}}`
  let n = 0
  const call = () => redis.evalsha(sha, 1, fresh ? `${base}:${n++}` : base, ...script.args)
  await call()
  const stat = async () => {
    const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await redis.info('commandstats'))!
    return [Number(m[1]), Number(m[2])]
  }
  const [c0, u0] = await stat()
  for (let i = 0; i < 40; i++) await Promise.all(Array.from({ length: 50 }, () => call()))
  const [c1, u1] = await stat()
  const left = await redis.keys(`${base}*`)
  for (let i = 0; i < left.length; i += 500) await redis.del(...left.slice(i, i + 500))
  return (u1! - u0!) / (c1! - c0!)
}

/**
 * Issue #14: the check script's own Redis time on a quiet machine, as the gateway sends it for
 * one plain window, for this build and, with BENCH_BASELINE, the older one.
 */
async function scriptCosts(redis: Redis): Promise<string[]> {
  const files: [string, string][] = [['basegate', join(DIST, 'src/limiter')]]
  const baseline = process.env.BENCH_BASELINE
  // Resolved first: a relative BENCH_BASELINE (dist/src/main.js) is not an import specifier.
  if (baseline) files.push(['basegate-baseline', join(dirname(resolve(baseline)), 'limiter')])
  const out = [
    `## the check script in Redis (µs of Redis time a call, one plain window sent as the build sends it, 2,000 calls, nothing else running; medians of ${ROUNDS} interleaved rounds)`,
    '',
    '| script | a new key (the bucket opens) | a busy key (its bucket open) |',
    '| --- | ---: | ---: |',
  ]
  // Interleaved, the order turned each round: measured in a fixed order, whichever script ran
  // first read several µs slower (a warming Redis), which looked like a difference of scripts.
  const samples = files.map(() => [[], []] as number[][])
  for (let round = 0; round < ROUNDS; round++) {
    for (const [l, fresh] of [true, false].entries()) {
      for (let k = 0; k < files.length; k++) {
        const f = (k + round) % files.length
        const us = await scriptUs(redis, files[f]![1], fresh)
        if (us !== null) samples[f]![l]!.push(us)
      }
    }
  }
  files.forEach(([name], f) => {
    const cells = samples[f]!.map((s) => (s.length > 0 ? median(s).toFixed(1) : '—'))
    out.push(`| ${name} | ${cells.join(' | ')} |`)
  })
  return out
}

/**
 * Issue #14: store calls (EVALSHA, give-backs included) per admitted call, with and without
 * leases: three instances in this process, each with its own connection and the production
 * stack (leases over the guard, its over-limit cache, the Redis store), 50 callers.
 */
async function leaseCosts(url: string, redis: Redis): Promise<string[]> {
  const cases = [
    { name: 'flood: one key at 10,000/min, 30,000 calls', keys: 1, limit: 10_000 },
    { name: '100 hot keys at 1,000,000/min, 30,000 calls', keys: 100, limit: 1_000_000 },
  ]
  const out = [
    '## leases: store calls per admitted call (3 instances in one process, 50 callers)',
    '',
    '| case | leases | admitted | refused | store calls | store calls per admitted call |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
  ]
  const evals = async () =>
    Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0)
  for (const [ci, cs] of cases.entries()) {
    for (const leases of [false, true]) {
      const clients = [0, 1, 2].map(() => new Redis(url, { enableAutoPipelining: true }))
      const stores = clients.map((c) => {
        const guarded = new GuardedStore(
          new RedisStore(c, { prefix: `bench-lease-${ci}-${leases}:`, clock: systemClock }),
          { onError: 'open', fallback: new MemoryStore(), clock: systemClock }
        )
        return leases ? new LeasingStore(guarded, { clock: systemClock }) : guarded
      })
      // Loads the script on every connection before counting.
      for (const st of stores) await st.peek([leaseCharge('warm', cs.limit)], Date.now())
      const before = await evals()
      let admitted = 0
      let refused = 0
      let next = 0
      await Promise.all(
        Array.from({ length: 50 }, async (_, caller) => {
          while (next < 30_000) {
            const k = next++ % cs.keys
            const d = await stores[caller % 3]!.consume([leaseCharge(k, cs.limit)], Date.now())
            if (d.allowed) admitted++
            else refused++
          }
        })
      )
      await Promise.all(stores.map((st) => st.close()))
      const calls = (await evals()) - before
      out.push(
        `| ${cs.name} | ${leases ? 'on' : 'off'} | ${admitted} | ${refused} | ${calls} | ${(calls / admitted).toFixed(3)} |`
      )
    }
  }
  return out
}

function leaseCharge(k: number | string, limit: number): Charge {
  const key = keys.cls(keys.subject(`bench${k}`, ''), 'base', 60_000)
  return { key, limit, windowMs: 60_000, kind: 'class', cls: 'base' }
}

async function main(): Promise<void> {
  // BENCH_ONLY=overrides: the in-process classification cost alone (seconds, no servers).
  // BENCH_ONLY=size: the size checks in process alone.
  if (ONLY?.length === 1 && ONLY[0] === 'size') {
    const md = (await checkCosts()).join('\n') + '\n'
    writeFileSync(join(ROOT, 'bench/results-size.md'), md)
    process.stdout.write(md)
    return
  }
  if (ONLY?.length === 1 && ONLY[0] === 'overrides') {
    const md = overrideCosts().join('\n') + '\n'
    writeFileSync(join(ROOT, 'bench/results-overrides.md'), md)
    process.stdout.write(md)
    return
  }
  const useWrk = ensureWrk()
  const redisPort = await freePort()
  // The bench's own process is the fixed-rate load generator (autocannon): on core 0 too.
  if (PIN) spawnSync('taskset', ['-pc', '0', String(process.pid)], { stdio: 'ignore' })
  const redisChild = spawn(
    ...pinned('redis-server', [
      '--port',
      String(redisPort),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
    ]),
    { stdio: 'ignore' }
  )
  children.push(redisChild)
  const redisUrl = `redis://127.0.0.1:${redisPort}`
  const redis = new Redis(redisUrl, { retryStrategy: (n) => (n > 50 ? null : 100) })
  await redis.ping()

  const upPort = await freePort()
  const upChild = await start(process.execPath, [join(DIST, 'bench/upstream.js'), String(upPort)])
  const upstream = `http://127.0.0.1:${upPort}`

  const scenarios = [
    {
      name: 'rotating',
      title: '1,000 rotating base UUIDs, limits that refuse nothing',
      baseLimit: '10000000/min',
      max: 10_000_000,
      lua: ROTATING_LUA,
      withHono: true,
    },
    {
      name: 'hot',
      title: 'one hot base, every call admitted',
      baseLimit: '10000000/min',
      max: 10_000_000,
      lua: HOT_LUA,
      withHono: false,
    },
    {
      name: 'hot100',
      title: '100 hot base UUIDs, every call admitted',
      baseLimit: '10000000/min',
      max: 10_000_000,
      lua: HOT100_LUA,
      withHono: false,
    },
    {
      name: 'flood',
      title: 'a flood on one base UUID that is over its limit (every answer 429)',
      baseLimit: '10/min',
      max: 10,
      lua: FLOOD_LUA,
      withHono: false,
    },
    {
      name: 'append',
      title: `POST rows with a 1,000-row body (${APPEND_BODY.length} bytes), 1,000 rotating bases`,
      baseLimit: '10000000/min',
      max: 10_000_000,
      lua: APPEND_LUA,
      withHono: false,
    },
  ]
  const results: Record<string, Record<string, Sample & { rounds: number }>> = {}
  let halfRate:
    | { rate: number; rows: Record<string, { p50: number[]; p99: number[]; rps: number[] }> }
    | undefined

  let oneMb: string[] = []
  for (const sc of scenarios) {
    if (ONLY !== undefined && !ONLY.includes(sc.name)) continue
    if (!useWrk && sc.name === 'append') continue // the autocannon fallback runs the GET scenarios only
    const gwPort = await freePort()
    const honoPort = await freePort()
    const peerPort = await freePort()
    const peer2Port = await freePort()
    const conf = join(WORK, `${sc.name}.yaml`)
    writeFileSync(
      conf,
      `listen: { host: 127.0.0.1, port: ${gwPort} }\nadmin: { host: 127.0.0.1, port: 0 }\nupstream: { url: "${upstream}" }\n` +
        `store: { url: "${redisUrl}", prefix: "bench-${sc.name}:" }\nrate_limits: { base: ${sc.baseLimit} }\n`
    )
    const procs = [
      await start(process.execPath, [join(DIST, 'src/main.js'), '--config', conf], SHIPPED),
      await start(process.execPath, [
        join(DIST, 'bench/peer.js'),
        String(peerPort),
        upstream,
        redisUrl,
        String(sc.max),
        'defaults',
      ]),
      await start(process.execPath, [
        join(DIST, 'bench/peer.js'),
        String(peer2Port),
        upstream,
        redisUrl,
        String(sc.max),
        'pipelined',
      ]),
    ]
    // Issue #26: the one-trip floor (node:http + one EVALSHA) and, for the flood, a bare 429.
    const floorPort = await freePort()
    const floor = await start(process.execPath, [
      join(DIST, 'bench/floor.js'),
      String(floorPort),
      upstream,
      redisUrl,
      String(sc.max),
    ])
    procs.push(floor)
    const barePort = await freePort()
    const bare =
      sc.name === 'flood'
        ? await start(process.execPath, [join(DIST, 'bench/bare429.js'), String(barePort)])
        : undefined
    if (bare) procs.push(bare)
    // Variants of the same gateway, each on its own port and key prefix (issue #14).
    const variant = async (
      name: string,
      head: string,
      storeExtra: string,
      main?: string,
      env: NodeJS.ProcessEnv = {}
    ) => {
      const port = await freePort()
      const file = join(WORK, `${sc.name}-${name}.yaml`)
      writeFileSync(
        file,
        head +
          readFileSync(conf, 'utf8')
            .replace(`port: ${gwPort}`, `port: ${port}`)
            .replace(
              `prefix: "bench-${sc.name}:"`,
              `prefix: "bench-${name}-${sc.name}:"${storeExtra}`
            )
      )
      const proc = await start(
        process.execPath,
        [main ?? join(DIST, 'src/main.js'), '--config', file],
        { ...SHIPPED, ...env },
        env.LOG_LEVEL === undefined ? undefined : port
      )
      procs.push(proc)
      return { port, proc }
    }
    // `workers: auto` (one proxy process per core); `store.leases: true`; and both, what an
    // operator after throughput would run.
    const workers = await variant('workers', 'workers: auto\n', '')
    const leases = await variant('leases', '', ', leases: true')
    const both = await variant('both', 'workers: auto\n', ', leases: true')
    // BENCH_BASELINE=/path/to/an/older/build/dist/src/main.js adds that build as a row, measured
    // in the same interleaved rounds (the side-by-side "no slower" check of a change).
    const baseline = process.env.BENCH_BASELINE
    // BENCH_BASELINE_NODE_OPTIONS: Node options for that row alone, in place of the shipped
    // ones (a V8 flag tried against the same build without it: BENCH_BASELINE=dist/src/main.js;
    // set and empty, Node's defaults).
    const baseEnv =
      process.env.BENCH_BASELINE_NODE_OPTIONS !== undefined
        ? { NODE_OPTIONS: process.env.BENCH_BASELINE_NODE_OPTIONS }
        : {}
    const base = baseline ? await variant('base', '', '', baseline, baseEnv) : undefined
    // BENCH_IETF=1: the same gateway with `header_style: both` (SPEC §10: x-ratelimit-* and the
    // IETF fields on every answer), for what the second set of headers costs.
    const ietf = process.env.BENCH_IETF
      ? await variant('ietf', 'header_style: both\n', '')
      : undefined
    // Issues #26 and #47 (flood, rotating): the same gateway writing no request lines
    // (LOG_LEVEL=error): what a call's line (SPEC §7) costs, read beside the floor and the peer,
    // which write none.
    const quiet =
      sc.name === 'flood' || sc.name === 'rotating'
        ? await variant('quiet', '', '', undefined, { LOG_LEVEL: 'error' })
        : undefined
    if (sc.withHono)
      procs.push(
        await start(
          process.execPath,
          [join(DIST, 'bench/hono-listener.js'), conf, String(honoPort)],
          SHIPPED
        )
      )
    const targets: Target[] = [
      { name: 'direct', url: upstream, pid: upChild.pid },
      { name: 'basegate', url: `http://127.0.0.1:${gwPort}`, pid: procs[0]!.pid },
      { name: 'peer', url: `http://127.0.0.1:${peerPort}`, pid: procs[1]!.pid },
      { name: 'peer-pipelined', url: `http://127.0.0.1:${peer2Port}`, pid: procs[2]!.pid },
      { name: 'floor', url: `http://127.0.0.1:${floorPort}`, pid: floor.pid },
    ]
    if (bare) targets.push({ name: 'bare-429', url: `http://127.0.0.1:${barePort}`, pid: bare.pid })
    const cores = CORES
    const rows: [string, { port: number; proc: ChildProcess } | undefined][] = [
      [`basegate-workers-${cores}`, workers],
      ['basegate-leases', leases],
      [`basegate-workers-${cores}-leases`, both],
      ['basegate-baseline', base],
      ['basegate-header-both', ietf],
      ['basegate-no-request-lines', quiet],
    ]
    for (const [name, v] of rows) {
      if (v) targets.push({ name, url: `http://127.0.0.1:${v.port}`, pid: v.proc.pid })
    }
    if (sc.name === 'append' && useWrk) {
      targets.push({
        name: 'basegate-unchecked',
        url: `http://127.0.0.1:${gwPort}`,
        pid: procs[0]!.pid,
        script: wrkScript('append-unchecked', APPEND_UNCHECKED_LUA),
      })
    }
    if (sc.withHono)
      targets.push({
        name: 'basegate-hono',
        url: `http://127.0.0.1:${honoPort}`,
        pid: procs.at(-1)!.pid,
      })
    const script = useWrk
      ? wrkScript(sc.name, sc.lua)
      : sc.name === 'flood'
        ? FLOOD_PATH
        : '/api-gateway/api/v2/dtables/00000001-0d3b-4c59-9a51-3e2d7c8b9a10/rows/'

    // Warm up every target (JIT, pools, its first writes of counts and evidence); for the flood
    // this also pushes the key over. At 1 s the row measured first in round 1 was still cold
    // (0.6 × its own later rounds), whichever build it was.
    for (const t of targets) await measure(t.url, t.script ?? script, redis, useWrk, 3)

    const samples: Record<string, Sample[]> = {}
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate the order each round so no target always runs first or last.
      const order = targets.map((_, i) => targets[(i + round) % targets.length]!)
      for (const t of order) {
        const s = await measure(t.url, t.script ?? script, redis, useWrk, SECONDS, t.pid)
        ;(samples[t.name] ??= []).push(s)
        process.stderr.write(
          `${sc.name} round ${round + 1} ${t.name}: ${s.rps.toFixed(0)} req/s cpu ${s.cpuUsPerReq.toFixed(1)} us/req p50 ${s.p50.toFixed(2)} ms p99 ${s.p99.toFixed(2)} ms non-2xx ${s.non2xx}\n`
        )
      }
    }
    results[sc.name] = {}
    for (const [name, ss] of Object.entries(samples)) {
      results[sc.name]![name] = {
        cpuUsPerReq: median(ss.map((s) => s.cpuUsPerReq)),
        rps: median(ss.map((s) => s.rps)),
        p50: median(ss.map((s) => s.p50)),
        p99: median(ss.map((s) => s.p99)),
        requests: ss.reduce((a, s) => a + s.requests, 0),
        non2xx: ss.reduce((a, s) => a + s.non2xx, 0),
        evalPerReq: median(ss.map((s) => s.evalPerReq)),
        cmdsPerReq: median(ss.map((s) => s.cmdsPerReq)),
        redisUsPerReq: median(ss.map((s) => s.redisUsPerReq)),
        rounds: ss.length,
      }
    }
    if (sc.name === 'rotating') {
      // Half of basegate's own maximum rate (issue #26), every row, interleaved (medians).
      const rate = Math.round(median(samples.basegate!.map((x) => x.rps)) / 2)
      const at: Record<string, { p50: number[]; p99: number[]; rps: number[] }> = {}
      for (let round = 0; round < ROUNDS; round++) {
        for (const t of targets.filter((t) => t.name !== 'basegate-hono')) {
          const r = await fixedRate(t.url, rate, SECONDS)
          const a = (at[t.name] ??= { p50: [], p99: [], rps: [] })
          a.p50.push(r.p50)
          a.p99.push(r.p99)
          a.rps.push(r.rps)
          process.stderr.write(`rotating at ${rate}/s ${t.name}: p50 ${r.p50} ms p99 ${r.p99} ms\n`)
        }
      }
      halfRate = { rate, rows: at }
    }
    if (sc.name === 'append') oneMb = await oneMbLatency(targets)
    for (const p of procs) await stop(p)
  }

  const lines: string[] = []
  lines.push(`# basegate benchmark`, '')
  lines.push(
    `Run ${new Date().toISOString()} on ${process.platform} ${process.arch}, Node ${process.version}, ` +
      `${useWrk ? 'wrk -t1' : 'autocannon'} with ${CONNS} connections, ${ROUNDS} interleaved rounds of ${SECONDS} s per row; medians.`
  )
  lines.push(
    'Every process (load generator, upstream, gateways, Redis) shares this machine; compare ratios, not absolutes.',
    ''
  )
  for (const sc of scenarios) {
    const r = results[sc.name]
    if (!r) continue
    lines.push(`## ${sc.name}: ${sc.title}`, '')
    const bare = r['bare-429']
    lines.push(
      '| target | req/s | p50 ms | p99 ms | vs direct | vs peer | vs floor | vs basegate |' +
        (bare ? ' vs bare-429 |' : '') +
        ' p99 vs floor | non-2xx | CPU µs/req (its process) | EVALSHA/req | Redis cmds/req (incl. in-script) | Redis µs/req (scripts) |'
    )
    lines.push(
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |' +
        (bare ? ' ---: |' : '') +
        ' ---: | ---: | ---: | ---: | ---: | ---: |'
    )
    const ratio = (a: number, b: number | undefined) => (b ? (a / b).toFixed(2) : '')
    for (const [name, s] of Object.entries(r)) {
      lines.push(
        `| ${name} | ${s.rps.toFixed(0)} | ${s.p50.toFixed(2)} | ${s.p99.toFixed(2)} | ${ratio(s.rps, r.direct?.rps)} | ${ratio(s.rps, r.peer?.rps)} | ${ratio(s.rps, r.floor?.rps)} | ${ratio(s.rps, r.basegate?.rps)} |` +
          (bare ? ` ${ratio(s.rps, bare.rps)} |` : '') +
          ` ${ratio(s.p99, r.floor?.p99)} | ${s.non2xx} | ${s.cpuUsPerReq.toFixed(1)} | ${s.evalPerReq.toFixed(3)} | ${s.cmdsPerReq.toFixed(2)} | ${s.redisUsPerReq.toFixed(2)} |`
      )
    }
    lines.push('')
  }
  lines.push(
    'Rows: `direct` is the upstream without a gateway; `basegate-baseline` (when present) is an older build (BENCH_BASELINE) in the same rounds; `basegate` is `basegate` with the Redis store; `basegate-unchecked` (append) is the same gateway taking the same bytes on a path with no size check; `peer` is fastify + @fastify/http-proxy + @fastify/rate-limit (Redis store, ioredis as its README shows it); `peer-pipelined` is the same with ioredis auto-pipelining (basegate writes a turn’s scripts as one pipeline too); `basegate-hono` is the same gateway mounted behind a Hono app on @hono/node-server; `basegate-workers-N` is the same gateway with `workers: auto` (N processes sharing the listener; CPU is the primary and its workers together); `basegate-leases` is the same gateway with `store.leases: true`; `basegate-header-both` (BENCH_IETF=1) the same with `header_style: both`; `floor` is node:http with one EVALSHA per call (a fixed window per base) and a keep-alive pool, no log or metrics: the one-trip floor; `basegate-no-request-lines` (flood, rotating) is basegate with LOG_LEVEL=error, writing no request line: what a call’s line costs (the floor and the peer write none); `bare-429` (flood) is a node:http server that answers every call with an empty 429, the limit of a Node process that only refuses.'
  )
  if (halfRate) {
    lines.push(
      '',
      `## rotating at half of basegate's maximum rate (${halfRate.rate} req/s, autocannon at a fixed rate, ${CONNS} connections, corrected for coordinated omission; medians of ${ROUNDS} rounds)`,
      '',
      '| target | req/s sent | p50 ms | p99 ms |',
      '| --- | ---: | ---: | ---: |'
    )
    for (const [name, a] of Object.entries(halfRate.rows)) {
      lines.push(
        `| ${name} | ${median(a.rps).toFixed(0)} | ${median(a.p50).toFixed(2)} | ${median(a.p99).toFixed(2)} |`
      )
    }
  }
  if (useWrk) {
    const names = ['rotating', 'flood', 'append'].filter((n) => results[n] !== undefined)
    const baselineBuild = process.env.BENCH_BASELINE
    if (baselineBuild && names.length > 0) lines.push('', ...paired(baselineBuild, names))
    // The floor forwards and refuses; it checks no size, so the append is not its comparison.
    const floorNames = names.filter((n) => n !== 'append')
    // Issue #47: the floor writes no log; the same pair without basegate's request lines
    // (SPEC §7) reads what the line costs against it, as reliably as the first.
    if (floorNames.length > 0)
      lines.push('', ...paired('floor', floorNames), '', ...paired('floor', floorNames, true))
  }
  lines.push('', ...oneMb)
  lines.push('', ...(await checkCosts()))
  lines.push('', ...overrideCosts())
  lines.push('', ...(await scriptCosts(redis)))
  lines.push('', ...(await leaseCosts(redisUrl, redis)))
  const md = lines.join('\n') + '\n'
  mkdirSync(join(ROOT, 'bench'), { recursive: true })
  const stem = ONLY === undefined ? 'results' : `results-${ONLY.join('-')}`
  writeFileSync(join(ROOT, `bench/${stem}.md`), md)
  writeFileSync(
    join(ROOT, `bench/${stem}.json`),
    JSON.stringify(
      {
        when: new Date().toISOString(),
        seconds: SECONDS,
        rounds: ROUNDS,
        connections: CONNS,
        results,
      },
      null,
      2
    ) + '\n'
  )
  process.stdout.write(md)
  redis.disconnect()
}

main()
  .catch((err) => {
    process.stderr.write(`bench failed: ${(err as Error).stack}\n`)
    process.exitCode = 1
  })
  .finally(async () => {
    for (const c of children.reverse()) await stop(c)
  })
