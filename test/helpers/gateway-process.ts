import { reapWithTest } from './reap.js'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

// Starts the real built `basegate` process (dist/src/main.js, built by `npm test`).

export const MAIN = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url))

/** A running gateway, in a process of its own (startGateway) or in the test's (live.ts). */
export interface Gateway {
  port: number
  adminPort: number
  url: string
  adminUrl: string
  configFile: string
  /** Every JSON line the gateway logged so far. */
  logs: Record<string, unknown>[]
  /** Waits for a log line matching `pred`. */
  waitForLog(
    pred: (l: Record<string, unknown>) => boolean,
    timeoutMs?: number
  ): Promise<Record<string, unknown>>
  /** Stops it (a signal to a process) and resolves with the exit code (0 in process). */
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

export interface GatewayProcess extends Gateway {
  proc: ChildProcess
  stderr: () => string
}

/** The lines a gateway logged, and waiting for one; `more` says what else to print on a miss. */
export function logLines(more: () => string = () => '') {
  const logs: Record<string, unknown>[] = []
  const waiters: {
    pred: (l: Record<string, unknown>) => boolean
    resolve: (l: Record<string, unknown>) => void
  }[] = []
  function add(obj: Record<string, unknown>): void {
    logs.push(obj)
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.pred(obj)) waiters.splice(i, 1)[0]!.resolve(obj)
    }
  }
  function waitForLog(pred: (l: Record<string, unknown>) => boolean, timeoutMs = 10_000) {
    const found = logs.find(pred)
    if (found) return Promise.resolve(found)
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const t = setTimeout(
        () =>
          reject(new Error(`no such log line; ${more()}logs: ${JSON.stringify(logs.slice(-5))}`)),
        timeoutMs
      )
      waiters.push({ pred, resolve: (l) => (clearTimeout(t), resolve(l)) })
    })
  }
  /** Adds every whole line of `text` (JSON, or `{unparsed}`); returns what is left of a line. */
  function addText(text: string): string {
    let buf = text
    let nl: number
    while ((nl = buf.indexOf('\n')) !== -1) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      let obj: Record<string, unknown>
      try {
        obj = JSON.parse(line)
      } catch {
        obj = { unparsed: line }
      }
      add(obj)
    }
    return buf
  }
  return { logs, waitForLog, addText }
}

export function writeConfig(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'bg-conf-'))
  const file = join(dir, 'limits.yaml')
  writeFileSync(file, yaml)
  return file
}

export function runOnce(
  args: string[],
  env: NodeJS.ProcessEnv = {}
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const proc = reapWithTest(
      spawn(process.execPath, [MAIN, ...args], {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    )
    let stdout = ''
    let stderr = ''
    proc.stdout.on('data', (d) => (stdout += d))
    proc.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000)
    proc.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

export async function startGateway(
  yaml: string,
  opts: { args?: string[]; env?: NodeJS.ProcessEnv } = {}
): Promise<GatewayProcess> {
  const configFile = writeConfig(yaml)
  const proc = spawn(process.execPath, [MAIN, '--config', configFile, ...(opts.args ?? [])], {
    env: { ...process.env, LOG_LEVEL: 'debug', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  reapWithTest(proc)
  let buf = ''
  let stderr = ''
  const { logs, waitForLog, addText } = logLines(() => `stderr: ${stderr}; `)
  proc.stderr!.on('data', (d) => (stderr += d))
  proc.stdout!.on('data', (d: Buffer) => (buf = addText(buf + d.toString())))
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)))

  const listening = await Promise.race([
    waitForLog((l) => l.msg === 'listening'),
    exited.then((code) => {
      throw new Error(`basegate exited ${code}: ${stderr}`)
    }),
  ])
  const port = (listening.proxy as { port: number }).port
  const adminPort = (listening.admin as { port: number }).port
  return {
    proc,
    port,
    adminPort,
    url: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    configFile,
    logs,
    stderr: () => stderr,
    waitForLog,
    stop: async (signal = 'SIGTERM') => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
      return exited
    },
  }
}

/** limits.yaml for a test: loopback, free ports, the given upstream. */
export function testYaml(upstreamUrl: string, extra = ''): string {
  return `listen: { host: 127.0.0.1, port: 0 }\nadmin: { host: 127.0.0.1, port: 0 }\nupstream: { url: "${upstreamUrl}" }\n${extra}\n`
}

/** testYaml with one pooled upstream connection (so a connection held for good shows). */
export function onePooledConnection(upstreamUrl: string, upstream = '', extra = ''): string {
  return testYaml(upstreamUrl, extra).replace(
    /^upstream:.*$/m,
    `upstream: { url: "${upstreamUrl}", max_connections: 1${upstream} }`
  )
}

/** testYaml with an admin listener that asks for `token` (the admin API's auth, SPEC §7). */
export function testYamlWithToken(upstreamUrl: string, token: string, extra = ''): string {
  return testYaml(upstreamUrl, extra).replace(
    /^admin: .*$/m,
    `admin: { host: 127.0.0.1, port: 0, token: "${token}" }`
  )
}
