// `npm test`'s two vitest stages: every file in parallel, then the load tests alone (their claim
// is about a load they make themselves). Both run whatever the first said, and both are
// reported (issue #34: with `&&`, a failure of the first hid the second); the exit is a failure
// when either failed.
import { spawnSync } from 'node:child_process'

const stages = [
  ['every test file, in parallel', ['vitest', 'run']],
  ['the load tests, alone', ['vitest', 'run', '--config', 'vitest.alone.config.ts']],
]
const results = stages.map(([name, args]) => {
  const r = spawnSync('npx', args, { stdio: 'inherit' })
  return [name, r.status === 0]
})
for (const [name, ok] of results)
  process.stdout.write(`npm test: ${name}: ${ok ? 'passed' : 'FAILED'}\n`)
process.exit(results.every(([, ok]) => ok) ? 0 : 1)
