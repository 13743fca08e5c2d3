import type { IncomingMessage, ServerResponse } from 'node:http'
import { afterAll, beforeAll } from 'vitest'
import { testYaml, type Gateway } from './gateway-process.js'
import { startStubUpstream, type StubUpstream } from './stub-upstream.js'

// SPEC §8's tests, in process and in processes of their own: a stub server of a chosen version
// behind a gateway.

/** The server's version asked every 200 ms and the upgrade report written every 100 ms. */
export const FAST = { BASEGATE_SERVER_INFO_MS: '200', BASEGATE_REPORT_FLUSH_MS: '100' }

/** A server of `version.current` (null: /server-info/ answers 404). */
export function serverOf(up: StubUpstream, version: { current: string | null }): void {
  up.handle((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0]!
    if (/^\/server-info\/?$/.test(path)) {
      if (version.current === null) return res.writeHead(404).end()
      return res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ version: `${version.current}.1`, edition: 'enterprise edition' }))
    }
    req.resume()
    req.on('end', () =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    )
  })
}

/**
 * A stub server of `version.current` behind a gateway started by `start` (startLive or
 * startGateway), for one describe block; waits until the gateway knows the version (when there
 * is one to know). Every key is kept by name (SPEC §4): the report's keys are what these read.
 */
export function useServerBehindGateway<G extends Gateway>(
  start: (yaml: string, opts: { env: NodeJS.ProcessEnv }) => Promise<G>,
  version: { current: string | null },
  extraYaml = ''
): { up: StubUpstream; gw: G } {
  const ctx = {} as { up: StubUpstream; gw: G }
  beforeAll(async () => {
    ctx.up = await startStubUpstream()
    serverOf(ctx.up, version)
    ctx.gw = await start(testYaml(ctx.up.url, `usage: { keep_after: 0 }\n${extraYaml}`), {
      env: FAST,
    })
    if (version.current !== null) await ctx.gw.waitForLog((l) => l.msg === 'server version known')
  })
  afterAll(async () => {
    await ctx.gw?.stop()
    await ctx.up?.close()
  })
  return ctx
}
