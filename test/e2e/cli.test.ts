import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { runOnce, startGateway, testYaml, writeConfig } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { holds } from '../helpers/until.js'
import { useStubUpstream } from '../helpers/stub-upstream.js'
import { reapWithTest } from '../helpers/reap.js'

const fixture = (name: string) =>
  fileURLToPath(new URL(`../fixtures/config/${name}`, import.meta.url))

const up = useStubUpstream()

describe('command line (SPEC §1)', () => {
  it('a bad config exits 2 with one line per problem naming the field', async () => {
    const r = await runOnce(['--config', fixture('bad-enum.yaml')])
    expect(r.code).toBe(2)
    expect(r.stderr.trim().split('\n')).toEqual([
      'deployment: must be one of "cloud", "dedicated", "self-hosted", got "on-prem"',
      'headers: must be one of "gateway", "all", "none", got "some"',
    ])
  })

  it('a missing file exits 2 naming it', async () => {
    const r = await runOnce(['--config', '/nonexistent/limits.yaml'])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('/nonexistent/limits.yaml: cannot be read (ENOENT)')
  })

  it('bad flags exit 2 naming the flag', async () => {
    const r = await runOnce(['--config', writeConfig(''), '--port', 'http', '--redis', 'http://x'])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('--port: "http" is not a port')
    expect(r.stderr).toContain('--redis: "http://x" is not a redis: or rediss: URL')
    const unknown = await runOnce(['--frobnicate'])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('usage: basegate')
  })

  it('flags beat the file; BASEGATE_CONFIG names the file when --config is absent', async () => {
    const file = writeConfig(
      'listen: { host: 127.0.0.1, port: 1 }\nadmin: { port: 0 }\nupstream: { url: "http://127.0.0.1:9" }'
    )
    const { spawn } = await import('node:child_process')
    const { MAIN } = await import('../helpers/gateway-process.js')
    const proc = reapWithTest(
      spawn(process.execPath, [MAIN, '--port', '0', '--upstream', up.url], {
        env: { ...process.env, BASEGATE_CONFIG: file },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    )
    try {
      const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
        let buf = ''
        proc.stdout.on('data', (d) => {
          buf += d
          for (const l of buf.split('\n')) if (l.includes('"listening"')) resolve(JSON.parse(l))
        })
        proc.on('exit', (c) => reject(new Error(`exited ${c}`)))
      })
      expect(line.upstream).toBe(up.url)
      const port = (line.proxy as { port: number }).port
      expect(port).not.toBe(1)
      expect((await send(port, { path: '/api2/ping/' })).body).toBe('"pong"')
    } finally {
      proc.kill('SIGTERM')
    }
  })

  it('warns that an in-memory store counts per process, and is always ready', async () => {
    const gw = await startGateway(testYaml(up.url))
    try {
      const w = await gw.waitForLog(
        (l) => typeof l.msg === 'string' && l.msg.includes('in this process only')
      )
      expect(w.level).toBe('warn')
      expect((await send(gw.adminPort, { path: '/readyz' })).status).toBe(200)
    } finally {
      await gw.stop()
    }
  })

  it('LOG_LEVEL sets the level: at warn, admitted requests leave no line', async () => {
    // At warn there is no "listening" line to read the ports from: fix them, wait on /healthz.
    const { spawn } = await import('node:child_process')
    const { MAIN } = await import('../helpers/gateway-process.js')
    const { freePort } = await import('../helpers/ports.js')
    const [port, adminPort] = [await freePort(), await freePort()]
    const file = writeConfig(
      `listen: { host: 127.0.0.1, port: ${port} }\nadmin: { port: ${adminPort} }\nupstream: { url: "${up.url}" }\nrate_limits: { account: 1/min }`
    )
    const proc = reapWithTest(
      spawn(process.execPath, [MAIN, '--config', file], {
        env: { ...process.env, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    )
    let out = ''
    proc.stdout.on('data', (d) => (out += d))
    try {
      for (let i = 0; i < 100; i++) {
        if ((await send(adminPort, { path: '/healthz' }).catch(() => null))?.status === 200) break
        await new Promise((r) => setTimeout(r, 50))
      }
      expect((await send(port, { path: '/api2/repos/' })).status).toBe(200)
      expect((await send(port, { path: '/api2/repos/' })).status).toBe(429)
      // Lines keep their order: once the 429's is out, the 200's would be before it.
      await holds(() => /"status":429[^\n]*\n/.test(out))
      const lines = out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(lines.some((l) => l.status === 429 && l.level === 'warn')).toBe(true)
      expect(lines.some((l) => l.level === 'info')).toBe(false)
    } finally {
      proc.kill('SIGTERM')
    }
  })

  it('SIGINT stops it like SIGTERM, exit 0', async () => {
    const gw = await startGateway(testYaml(up.url))
    expect(await gw.stop('SIGINT')).toBe(0)
    expect(gw.logs.some((l) => l.msg === 'stopped')).toBe(true)
  })

  it('SIGTERM lets an in-flight request finish, then exits 0', async () => {
    let reached = () => {}
    const atServer = new Promise<void>((r) => (reached = r))
    up.handle((_req, res) => {
      reached()
      setTimeout(() => res.end('slow but whole'), 700)
    })
    const gw = await startGateway(testYaml(up.url))
    try {
      const inflight = send(gw.port, { path: '/api2/repos/' })
      await atServer // in flight: the server has it and answers 700 ms later
      const code = gw.stop('SIGTERM')
      const a = await inflight
      expect(a.status).toBe(200)
      expect(a.body).toBe('slow but whole')
      expect(await code).toBe(0)
    } finally {
      up.handle(null)
    }
  })

  it('SIGHUP reloads the file; a bad file is refused and the running config stays', async () => {
    const { writeFileSync } = await import('node:fs')
    const gw = await startGateway(testYaml(up.url, 'rate_limits: { account: 2/min }\nheaders: all'))
    try {
      expect((await send(gw.port, { path: '/api2/repos/' })).headers['x-ratelimit-limit']).toBe('2')
      writeFileSync(
        gw.configFile,
        testYaml(up.url, 'rate_limits: { account: 500/mn }\nheaders: all')
      )
      gw.proc.kill('SIGHUP')
      const refused = await gw.waitForLog(
        (l) => l.msg === 'configuration refused; the running one stays'
      )
      expect(refused.problems).toEqual([
        'rate_limits.account: "500/mn" is not a rate (write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited)',
      ])
      expect((await send(gw.port, { path: '/api2/repos/' })).headers['x-ratelimit-limit']).toBe('2')
      writeFileSync(
        gw.configFile,
        testYaml(up.url, 'rate_limits: { account: 10/min }\nheaders: all')
      )
      gw.proc.kill('SIGHUP')
      await gw.waitForLog((l) => l.msg === 'configuration reloaded')
      const a = await send(gw.port, { path: '/api2/repos/' })
      expect(a.headers['x-ratelimit-limit']).toBe('10')
      // Counters are kept: two calls were already counted on this key.
      expect(a.headers['x-ratelimit-remaining']).toBe('7')
    } finally {
      await gw.stop()
    }
  })
})

describe('basegate check (SPEC §1)', () => {
  it('exit 0 for a valid file, with the flags applied', async () => {
    const r = await runOnce(['check', '--config', writeConfig('listen: { port: 8081 }\n')])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('valid')
  })

  it('exit 2 and every problem at once: env, schema, cross-field, and --port in the port check', async () => {
    const file = writeConfig(
      'admin: { port: 9999 }\nstore: { url: "${BASEGATE_CHECK_UNSET}" }\nrate_limits: { base: 5/mn }\nmonthly: { teams: [ { id: t, plan: gold } ] }\n'
    )
    const r = await runOnce(['check', '--config', file, '--port', '9999'])
    expect(r.code).toBe(2)
    const lines = r.stderr.trim().split('\n')
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^store\.url: \$\{BASEGATE_CHECK_UNSET\} is not set/),
        'rate_limits.base: "5/mn" is not a rate (write N/s, N/sec, N/second, N/min, N/minute, N/hour, N/day, or unlimited)',
        'monthly.teams[0].plan: "gold" is not a plan (the plans: free, plus, enterprise)',
        expect.stringMatching(/^admin\.port: 9999 is the proxy's port/),
      ])
    )
    expect(lines).toHaveLength(4)
  })
})

// Issue #25: a first run that works as written, and answers nobody can misread.
describe('first-run answers', () => {
  it('check prints the warnings of a rule that can never match, and still exits 0', async () => {
    const r = await runOnce([
      'check',
      '--config',
      writeConfig(
        'rate_limits: { rules: [{ name: a, method: GETT, path: "/api-gateway/api/v2/dtables/{baseuuid}/rows/", limits: 5/min }] }\n'
      ),
    ])
    expect(r.code).toBe(0)
    expect(r.stderr).toMatch(/^warning: rate_limits\.rules\[0\]\.path: \{baseuuid\}/m)
    expect(r.stderr).toMatch(/^warning: rate_limits\.rules\[0\]\.method: "GETT"/m)
  })

  it('upgrade-report --to a version past the known history says so and exits 2', async () => {
    const r = await runOnce(['upgrade-report', '--to', '7.0', '--config', writeConfig('')])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/7\.0 is past 6\.2, the newest release/)
    expect(r.stdout).toBe('')
  })

  it('upgrade-report and tune-report with neither the admin API nor the store to ask: one line each, exit 2', async () => {
    const { createServer } = await import('node:net')
    const free = createServer()
    await new Promise<void>((r) => free.listen(0, '127.0.0.1', r))
    const port = (free.address() as { port: number }).port
    await new Promise((r) => free.close(r))
    // A wildcard bind is asked on loopback; the store is in-memory (nothing shared to read).
    const file = writeConfig(
      `admin: { host: "0.0.0.0", port: ${port}, token: "a-long-enough-admin-token-0123456789" }\n`
    )
    const upgrade = await runOnce(['upgrade-report', '--to', '6.2', '--config', file])
    expect(upgrade.code).toBe(2)
    expect(upgrade.stderr).toMatch(
      new RegExp(
        `^no report: the admin API at http://127\\.0\\.0\\.1:${port} .*, and the store is in-memory \\(the report lives in the running process\\)$`,
        'm'
      )
    )
    const tune = await runOnce(['tune-report', '--config', file, '--running', file])
    expect(tune.code).toBe(2)
    expect(tune.stderr).toMatch(
      new RegExp(
        `^no report: the admin API at http://127\\.0\\.0\\.1:${port} .*, and the store is in-memory \\(the evidence lives in the running process\\)$`,
        'm'
      )
    )
  })

  it('demo-upstream on a busy port says so in one line and exits 1', async () => {
    const { createServer } = await import('node:net')
    const busy = createServer()
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r))
    const port = (busy.address() as { port: number }).port
    try {
      const r = await runOnce(['demo-upstream', '--port', String(port)])
      expect(r.code).toBe(1)
      expect(r.stderr.trim().split('\n')).toEqual([
        `demo-upstream: port ${port} on 127.0.0.1 is in use; try --port N`,
      ])
    } finally {
      busy.close()
    }
  })
})
