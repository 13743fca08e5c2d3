import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/tools/ needs promtool and systemd-analyze: `.ci/tools` runs it (vitest.tools.config.ts).
    // test/e2e/store-load.test.ts runs on its own after the rest (vitest.alone.config.ts).
    exclude: ['test/tools/**', 'test/heavy/**', 'node_modules/**', 'test/e2e/store-load.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: e2e suites start real processes; keep file-level parallelism modest.
    maxWorkers: 2,
  },
})
