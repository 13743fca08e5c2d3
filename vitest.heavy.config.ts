import { defineConfig } from 'vitest/config'
import base from './vitest.config.js'

// Heavy load scenarios run by `.ci/load` once, after `npm test` (they take most of a minute of
// both cores each): issue #33's 200,000 one-off bases in a minute.
export default defineConfig({
  test: { ...base.test, include: ['test/heavy/**/*.test.ts'], exclude: [], maxWorkers: 1 },
})
