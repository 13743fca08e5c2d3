import { spawn, spawnSync } from 'node:child_process'
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { freePort } from '../helpers/ports.js'
import { startStubUpstream } from '../helpers/stub-upstream.js'
import { send } from '../helpers/http.js'

// No Docker engine here: the runtime stage of deploy/Dockerfile is read and its own steps run
// as a script in a scratch directory (COPY as a copy, RUN in a shell, then CMD and HEALTHCHECK),
// to show the image would work.

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url))
const dockerfile = readFileSync(root('deploy/Dockerfile'), 'utf8')
const stages = dockerfile.split(/^FROM /m).slice(1)
const runtime = stages.at(-1)!
const scratch = mkdtempSync(join(tmpdir(), 'bg-image-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const json = (line: string) => JSON.parse(line.slice(line.indexOf('[')))

describe('deploy/Dockerfile', () => {
  it('is multi-stage, non-root, production dependencies only, with a healthcheck on /healthz', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2)
    expect(runtime).toMatch(/^USER node$/m)
    expect(runtime).toMatch(/^RUN npm ci --omit=dev/m)
    expect(runtime).toMatch(/^HEALTHCHECK .*"\/healthz"\]$/m)
  })

  it('its runtime steps, run in a scratch directory, give a basegate that starts and passes its healthcheck', async () => {
    const workdir = join(scratch, /^WORKDIR (\S+)$/m.exec(runtime)![1]!)
    mkdirSync(workdir, { recursive: true })
    const env: NodeJS.ProcessEnv = { ...process.env }
    for (const line of runtime.split('\n')) {
      const copy = /^COPY (--from=\S+ )?(.+) (\S+)$/.exec(line)
      if (copy) {
        const fromBuild = copy[1] !== undefined
        const dst = copy[3]!.startsWith('/') ? join(scratch, copy[3]!) : join(workdir, copy[3]!)
        for (const src of copy[2]!.split(' ')) {
          // The build stage compiles to /src/dist: the same `npm run build` that made ./dist.
          const from = fromBuild ? root(src.replace(/^\/src\//, '')) : root(src)
          const to = dst.endsWith('/') ? join(dst, src.split('/').pop()!) : dst
          mkdirSync(dirname(to), { recursive: true })
          if (fromBuild) cpSync(from, to, { recursive: true })
          else copyFileSync(from, to)
        }
      }
      const run = /^RUN (.+)$/.exec(line)
      if (run) {
        // Keep the machine's npm cache (and use it): a scratch run must not wipe it.
        const cmd = run[1]!.replace('npm cache clean --force', 'true')
        const r = spawnSync('sh', ['-c', cmd], {
          cwd: workdir,
          env: { ...env, npm_config_prefer_offline: 'true' },
          encoding: 'utf8',
          timeout: 170_000,
        })
        expect(r.status, r.stderr).toBe(0)
      }
      const e = /^ENV (\w+)=(\S+)$/.exec(line)
      if (e) env[e[1]!] = e[2]!
    }
    // Only production dependencies were installed (read in the image's own node_modules: a
    // resolve from here would also find one left in a parent directory, such as /tmp's).
    expect(existsSync(join(workdir, 'node_modules', 'ioredis', 'package.json'))).toBe(true)
    expect(existsSync(join(workdir, 'node_modules', 'vitest'))).toBe(false)

    const up = await startStubUpstream()
    const adminPort = await freePort()
    const cmd = json(/^CMD (.+)$/m.exec(runtime)![0]!) as string[]
    const configArg = cmd.indexOf('--config') + 1
    cmd[configArg] = join(scratch, cmd[configArg]!)
    const runEnv = { ...env, BASEGATE_UPSTREAM: up.url, BASEGATE_ADMIN_PORT: String(adminPort) }
    const proc = spawn(cmd[0]!, [...cmd.slice(1), '--port', '0'], {
      cwd: workdir,
      env: runEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let buf = ''
        proc.stdout!.on('data', (d) => {
          buf += d
          const line = buf.split('\n').find((l) => l.includes('"listening"'))
          if (line) resolve(JSON.parse(line).proxy.port)
        })
        proc.on('exit', (code) => reject(new Error(`exited ${code}`)))
      })
      expect((await send(port, { path: '/api2/ping/' })).body).toBe('"pong"')
      const health = json(/^HEALTHCHECK .*CMD (\[.+)$/m.exec(runtime)![1]!) as string[]
      const hc = spawnSync(health[0]!, health.slice(1), {
        cwd: workdir,
        env: runEnv,
        encoding: 'utf8',
      })
      expect(hc.status).toBe(0)
      const down = spawnSync(health[0]!, health.slice(1), {
        cwd: workdir,
        env: { ...runEnv, BASEGATE_ADMIN_PORT: String(await freePort()) },
      })
      expect(down.status).toBe(1)
    } finally {
      proc.kill('SIGTERM')
      await up.close()
    }
  }, 180_000)
})
