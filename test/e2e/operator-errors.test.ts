import { spawn } from 'node:child_process'
import { createServer, type Server } from 'node:net'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  runOnce,
  startGateway,
  testYaml,
  testYamlWithToken,
  writeConfig,
} from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'
import { reapWithTest } from '../helpers/reap.js'

// Issue #34 items 6, 7 and 12: errors that name the thing an operator must change, and the
// counts that say what the server answered.

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'

/** A port something else holds. */
function holdPort(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, port: (server.address() as { port: number }).port })
    )
  })
}

/** Runs a command until `done` says its output is enough (or 15 s); returns both streams. */
function runUntil(
  args: string[],
  env: NodeJS.ProcessEnv,
  done: (stdout: string, stderr: string) => boolean
): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve) => {
    const proc = reapWithTest(
      spawn(process.execPath, args, {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    )
    let stdout = ''
    let stderr = ''
    const check = () => {
      if (done(stdout, stderr)) proc.kill('SIGTERM')
    }
    proc.stdout.on('data', (d) => ((stdout += d), check()))
    proc.stderr.on('data', (d) => ((stderr += d), check()))
    const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000)
    proc.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ stdout, stderr, code })
    })
  })
}

const lineOf = (stdout: string, pred: (l: Record<string, unknown>) => boolean) =>
  stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find(pred)

describe('errors that name the thing (issue #34)', () => {
  let up: StubUpstream
  beforeAll(async () => {
    up = await startStubUpstream()
  })
  afterAll(async () => {
    await up?.close()
  })

  it('item 6: Redis down names the store (password masked) and the socket error, with no stack', async () => {
    const held = await holdPort()
    const dead = held.port
    await new Promise((r) => held.server.close(r)) // nothing listens there now
    const gw = await startGateway(
      testYaml(up.url, `store: { url: "redis://:s3cret@127.0.0.1:${dead}", timeout_ms: 50 }`)
    )
    try {
      const line = await gw.waitForLog(
        (l) => l.msg?.toString().startsWith('the store does not answer yet') === true,
        15_000
      )
      expect(line.store).toBe(`redis://****@127.0.0.1:${dead}`)
      expect(String(line.error)).toMatch(/ECONNREFUSED/)
      expect(String(line.msg)).toContain(`127.0.0.1:${dead}`)
      await send(gw.port, { path: `/api-gateway/api/v2/dtables/${U}/rows/` })
      await send(gw.port, { path: `/api-gateway/api/v2/dtables/${U}/rows/` })
      await send(gw.port, { path: `/api-gateway/api/v2/dtables/${U}/rows/` })
      const down = await gw.waitForLog((l) => l.msg === 'store unavailable')
      expect(down.store).toBe(`redis://****@127.0.0.1:${dead}`)
      expect(String(down.error)).toMatch(/ECONNREFUSED/)
      expect(down.err).toBeUndefined() // no stack
      expect(JSON.stringify(gw.logs)).not.toContain('s3cret')
    } finally {
      await gw.stop()
    }
  })

  it('item 7: a port in use names the setting to change', async () => {
    const held = await holdPort()
    try {
      const file = writeConfig(
        `listen: { host: 127.0.0.1, port: ${held.port} }\nadmin: { host: 127.0.0.1, port: 0 }\nupstream: { url: "${up.url}" }\n`
      )
      const r = await runOnce(['--config', file])
      expect(r.code).toBe(1)
      const line = lineOf(r.stdout, (l) => l.level === 'fatal')!
      expect(line.msg).toBe(
        `listen.port ${held.port} on 127.0.0.1 is in use (EADDRINUSE): set listen.port (or --port) to a free port, or stop what holds it`
      )
      const adminFile = writeConfig(
        `listen: { host: 127.0.0.1, port: 0 }\nadmin: { host: 127.0.0.1, port: ${held.port} }\nupstream: { url: "${up.url}" }\n`
      )
      const a = await runOnce(['--config', adminFile])
      expect(lineOf(a.stdout, (l) => l.level === 'fatal')!.msg).toMatch(
        new RegExp(
          `^admin\\.port ${held.port} on 127\\.0\\.0\\.1 is in use \\(EADDRINUSE\\): set admin\\.port`
        )
      )
    } finally {
      held.server.close()
    }
  })

  it('item 7: upgrade-report with a wrong token says the admin API answered 401, not that it did not answer', async () => {
    const gw = await startGateway(testYamlWithToken(up.url, 'right-token-0123456789'))
    try {
      const file = writeConfig(
        `admin: { host: 127.0.0.1, port: ${gw.adminPort}, token: "wrong-token-0123456789" }\n`
      )
      const r = await runOnce(['upgrade-report', '--to', '6.2', '--config', file])
      expect(r.code).toBe(2)
      expect(r.stderr).toMatch(
        /answered 401 .*admin\.token in this file is not the running instance's/
      )
      expect(r.stderr).not.toMatch(/did not answer/)
    } finally {
      await gw.stop()
    }
  })

  it('item 7: npm run demo moves off 8000/8080/9090, and demo-upstream says where it listens', async () => {
    const demo = fileURLToPath(new URL('../../dist/src/demo.js', import.meta.url))
    const r = await runUntil(
      [demo, '--upstream-port', '0', '--port', '0'],
      { BASEGATE_ADMIN_PORT: '0', LOG_LEVEL: 'info' },
      (out) => out.includes('"listening"')
    )
    expect(r.stdout).toMatch(
      /demo upstream \(SeaTable-shaped answers\) on http:\/\/127\.0\.0\.1:\d+/
    )
    expect(r.stdout).not.toContain(':8000\n')
    const listening = lineOf(r.stdout, (l) => l.msg === 'listening')!
    expect((listening.proxy as { port: number }).port).not.toBe(8080)
    expect((listening.admin as { port: number }).port).not.toBe(9090)
    const main = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url))
    const u = await runUntil([main, 'demo-upstream', '--port', '0'], {}, (out) =>
      out.includes('on http://')
    )
    expect(u.stdout).toMatch(
      /^demo upstream \(SeaTable-shaped answers\) on http:\/\/127\.0\.0\.1:\d+$/m
    )
  })
})
