import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import YAML from 'yaml'
import { NODE_OPTIONS } from '../src/node-options.js'

const read = (p: string) => readFileSync(fileURLToPath(new URL(`../${p}`, import.meta.url)), 'utf8')

// Objects that live a while make V8 grow its young generation to the most it may; the child
// prints the largest size it saw (MiB).
const GROW = `
const v8 = require('node:v8')
const ring = new Array(300000)
let max = 0
for (let i = 0; i < 3000000; i++) {
  ring[i % ring.length] = { i, s: 'x' + i }
  if (i % 50000 === 0) max = Math.max(max, v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size)
}
process.stdout.write(String(max / 1048576))
`
const youngMiB = (nodeOptions: string | undefined): number => {
  const env = { ...process.env }
  delete env.NODE_OPTIONS
  if (nodeOptions !== undefined) env.NODE_OPTIONS = nodeOptions
  const r = spawnSync(process.execPath, ['-e', GROW], { env, encoding: 'utf8' })
  expect(r.status, r.stderr).toBe(0)
  return Number(r.stdout)
}

describe('the V8 options basegate runs with', () => {
  it('are accepted in NODE_OPTIONS and cap the young generation (Node alone lets it grow four times larger)', () => {
    const capped = youngMiB(NODE_OPTIONS)
    const free = youngMiB(undefined)
    expect(capped).toBeLessThanOrEqual(32)
    expect(free).toBeGreaterThanOrEqual(4 * capped)
  })

  it('are where basegate is started: the image, the systemd unit and npm start', () => {
    expect(/^ENV NODE_OPTIONS="(.*)"$/m.exec(read('deploy/Dockerfile'))?.[1]).toBe(NODE_OPTIONS)
    expect(
      /^Environment=NODE_OPTIONS=(.*)$/m.exec(read('deploy/systemd/basegate.service'))?.[1]
    ).toBe(NODE_OPTIONS)
    expect(JSON.parse(read('package.json')).scripts.start).toBe(
      `node ${NODE_OPTIONS} dist/src/main.js`
    )
  })

  it('are not overridden by compose or Kubernetes, which run the image', () => {
    const env = YAML.parse(read('docker-compose.yml')).services.basegate.environment ?? {}
    expect(Object.keys(env)).not.toContain('NODE_OPTIONS')
    expect(read('deploy/k8s/basegate.yaml')).not.toContain('NODE_OPTIONS')
  })
})
