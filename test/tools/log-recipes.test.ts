import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #25: the operator's guide's jq recipes (docs/operating.md), run as written on a real log captured as an operator
// would (`npm start > basegate.log`, npm's banner lines included). Needs jq (`.ci/tools`).

const readme = readFileSync(
  fileURLToPath(new URL('../../docs/operating.md', import.meta.url)),
  'utf8'
)
const recipes = [...readme.matchAll(/^(jq -R.*basegate\.log.*)$/gm)].map((m) => m[1]!)
const U = 'b1b2c3d4-0d3b-4c59-9a51-3e2d7c8b9a10'
const rows = `/api-gateway/api/v2/dtables/${U}/rows/`
const dir = mkdtempSync(join(tmpdir(), 'bg-recipes-'))

let up: StubUpstream
let enforce: GatewayProcess
let dry: GatewayProcess
beforeAll(async () => {
  up = await startStubUpstream()
  up.handle((req, res) => {
    // One slow call, for the "what the upstream is slow on" recipe.
    const wait = req.url?.includes('slow') ? 1100 : 0
    setTimeout(() => res.end('{}'), wait)
  })
  const team = `monthly: { enabled: true, teams: [ { id: acme, plan: free, users: 1, bases: ["${U}"] } ] }`
  const env = { BASEGATE_SUMMARY_MS: '300', LOG_LEVEL: 'info' }
  enforce = await startGateway(testYaml(up.url, `rate_limits: { base: 2/min }\n${team}`), { env })
  dry = await startGateway(testYaml(up.url, `mode: dry-run\nrate_limits: { base: 1/min }`), { env })
  for (let i = 0; i < 4; i++) await send(enforce.port, { path: rows })
  await send(enforce.port, { path: '/dtable/slow/' })
  for (let i = 0; i < 3; i++) await send(dry.port, { path: rows })
  await enforce.waitForLog((l) => String(l.msg).startsWith('usage summary'))
  await enforce.stop()
  await dry.stop()
  const lines = [...enforce.logs, ...dry.logs].map((l) => JSON.stringify(l))
  const banner = ['', '> basegate@0.4.0 start', '> node dist/src/main.js', '']
  writeFileSync(join(dir, 'basegate.log'), [...banner, ...lines].join('\n') + '\n')
}, 30_000)
afterAll(async () => {
  await up?.close()
})

const run = (recipe: string) =>
  spawnSync('bash', ['-o', 'pipefail', '-c', recipe], { cwd: dir, encoding: 'utf8' })

describe("the README's log recipes", () => {
  it('are found: six of them', () => {
    expect(recipes).toHaveLength(6)
  })

  it.each([
    ['dry_run', /"would_refuse":"rate"/],
    ['status==429', /refused: over limit/],
    // Issue #34 item 9: the 429s of the over-limit cache carry no count and are skipped.
    ['select(.team and .used)', /^acme [1-9]\d*\/3000$/m],
    ['.policy //', /^\s+\d+ base$/m],
    ['usage summary', /"busiest"/],
    ['upstream_ms > 1000', /^1\d{3}(\.\d+)? GET \/dtable\/slow\//m],
  ])('the %s recipe runs on a log with npm banner lines', (marker, expected) => {
    const recipe = recipes.find((r) => r.includes(marker))!
    expect(recipe).toBeDefined()
    const r = run(recipe)
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toMatch(expected)
  })
})
