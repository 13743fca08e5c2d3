import { defineConfig } from 'vitest/config'

// `.ci/tools`: the checks that need tools beyond Node and redis-server (promtool,
// systemd-analyze, jq, chromium), run after .ci/tools installs them. `npm test` leaves them out.
export default defineConfig({
  test: {
    include: ['test/tools/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
})
