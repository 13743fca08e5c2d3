import { defineConfig } from 'vitest/config'
import base from './vitest.config.js'

// Tests whose claim is about a load they make themselves (issue #22: 300 calls in flight beside
// two busy processes must never send an instance to its fallback). Beside other test files the
// load would be theirs and the other files' together, which nothing bounds. `npm test` runs
// them after the rest, one file at a time; `.ci/load` runs them ten times.
const ALONE = ['test/e2e/store-load.test.ts']

export default defineConfig({
  test: { ...base.test, include: ALONE, exclude: [], maxWorkers: 1 },
})
