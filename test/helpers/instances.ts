import { afterAll, beforeAll } from 'vitest'
import { startGateway, testYaml, type GatewayProcess } from './gateway-process.js'
import { startRedis, type TestRedis } from './redis.js'
import { startStubUpstream, type StubUpstream } from './stub-upstream.js'

/**
 * Several basegate instances sharing one redis-server and one stub upstream, for the tests of
 * what instances share. Call it inside a describe: it starts them before the suite and stops
 * them after.
 */
export function useInstances(opts: {
  count: number
  /** limits.yaml lines beyond listen/admin/upstream (the store, limits, …). */
  yaml: (redis: TestRedis) => string
  env?: NodeJS.ProcessEnv
  /** Shapes the stub upstream before the instances start. */
  upstream?: (up: StubUpstream) => void
}): { readonly redis: TestRedis; readonly up: StubUpstream; readonly gws: GatewayProcess[] } {
  let redis: TestRedis | undefined
  let up: StubUpstream | undefined
  const gws: GatewayProcess[] = []
  beforeAll(async () => {
    redis = await startRedis()
    up = await startStubUpstream()
    opts.upstream?.(up)
    const yaml = testYaml(up.url, opts.yaml(redis))
    for (let i = 0; i < opts.count; i++) gws.push(await startGateway(yaml, { env: opts.env }))
  })
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()))
    await up?.close()
    await redis?.stop()
  })
  return {
    get redis() {
      return redis!
    },
    get up() {
      return up!
    },
    gws,
  }
}
