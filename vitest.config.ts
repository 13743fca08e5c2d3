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
    // Two cores, but most e2e files wait on processes, sockets and timers: three files at once
    // took the parallel stage from 152 s to 133 s here, and it passes beside two busy loops.
    maxWorkers: 3,
  },
})
