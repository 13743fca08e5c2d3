#!/usr/bin/env node
// The launcher: a Node too old says so and exits 2 (issue #41), `--version` answers without
// loading anything else, and everything else is serve.ts's.
import { nodeProblem } from './node-version.js'

const problem = nodeProblem(process.versions.node)
if (problem !== null) {
  process.stderr.write(problem + '\n')
  process.exit(2)
}
if (process.argv[2] === '--version' && process.argv.length === 3) {
  const { version } = await import('./version.js')
  process.stdout.write(`basegate ${version()}\n`)
} else {
  await import('./serve.js')
}
