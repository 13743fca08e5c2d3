import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { freePort } from '../helpers/ports.js'

// Issue #12: the README's first screen, run verbatim on the fresh build: the demo upstream,
// `npm start` with the shipped limits.yaml, and the curl that shows the three headers. Every
// test that runs `npx basegate` lives in this file, so they run one after the other: npx
// links the local package on first use, and two at once race on that link.

const root = fileURLToPath(new URL('../../', import.meta.url))
const readme = readFileSync(`${root}README.md`, 'utf8')
const block = /```sh\n(npm run demo[\s\S]*?)```/.exec(readme)![1]!
const lines = block
  .split('\n')
  .map((l) => l.replace(/\s+#.*$/, '').trim())
  .filter(Boolean)

const started: ChildProcess[] = []
afterAll(async () => {
  // Each line ran in a process group of its own: end the groups (npm exec and its children).
  const signal = (sig: NodeJS.Signals) => {
    for (const p of started) {
      try {
        process.kill(-p.pid!, sig)
      } catch {
        /* gone */
      }
    }
  }
  signal('SIGTERM')
  // Each has a second to end of itself; what is left of a group then is killed.
  const ended = (p: ChildProcess) =>
    new Promise<void>((r) =>
      p.exitCode !== null || p.signalCode !== null ? r() : p.once('exit', () => r())
    )
  await Promise.race([Promise.all(started.map(ended)), new Promise((r) => setTimeout(r, 1000))])
  signal('SIGKILL')
})

async function until(fn: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms
  while (!fn() && Date.now() < end) await new Promise((r) => setTimeout(r, 100))
}

describe('npx basegate', () => {
  it('`npx basegate --config FILE` runs the package command', () => {
    const bad = fileURLToPath(new URL('../fixtures/config/bad-rate.yaml', import.meta.url))
    const r = spawnSync('npx', ['--no-install', 'basegate', '--config', bad], {
      cwd: root,
      encoding: 'utf8',
      timeout: 30_000,
      // npx links the local package and, with scripts on, runs its `prepare` (a full build)
      // into dist/ while other test files start dist/src/main.js: a half-written module there
      // failed a CI run. `npm test` has just built dist/, so the link needs no scripts.
      env: { ...process.env, npm_config_ignore_scripts: 'true' },
    })
    expect(r.status, r.stderr).toBe(2)
    expect(r.stderr).toContain('rate_limits.base: "500/mn" is not a rate')
  })
})

describe("the README's first screen", () => {
  it('starts the demo upstream and basegate, and the curl shows a 200 with the three headers', async () => {
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatch(/^npm run demo\s*&$/)
    expect(lines[1]).toContain(':8080/')
    // The README's commands on ports nothing else holds (issue #34: 8000, 8080 and 9090 may be
    // taken on the machine running the tests): the same commands, moved as the README says.
    const [proxy, admin] = [await freePort(), await freePort()]
    const start = `npm run demo -- --upstream-port 0 --port ${proxy}`
    const curl = lines[1]!.replace(':8080/', `:${proxy}/`)
    const p = spawn('bash', ['-c', start], {
      cwd: root,
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, BASEGATE_ADMIN_PORT: String(admin) },
    })
    started.push(p)
    let answer = ''
    await until(() => {
      const r = spawnSync('bash', ['-c', curl], { cwd: root, encoding: 'utf8' })
      answer = r.stdout
      return answer.startsWith('HTTP/1.1 200')
    }, 20_000)
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK/)
    expect(answer).toMatch(/^x-ratelimit-limit: 500\r?$/m)
    expect(answer).toMatch(/^x-ratelimit-remaining: \d+\r?$/m)
    expect(answer).toMatch(/^x-ratelimit-reset: \d{10}\r?$/m)
    expect(answer).toContain('"rows":[')
  }, 30_000)
})

describe("the README's Configuring example", () => {
  it('is a valid limits.yaml, as written', async () => {
    const { parseConfig } = await import('../../src/config/load.js')
    const example = /## Configuring[\s\S]*?```yaml\n([\s\S]*?)```/.exec(readme)![1]!
    const r = parseConfig(example, { REDIS_URL: 'redis://127.0.0.1:6379' })
    expect(r.ok ? [] : r.problems).toEqual([])
  })
})
