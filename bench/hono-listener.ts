import { getRequestListener } from '@hono/node-server'
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response'
import { Hono } from 'hono'
import { createServer } from 'node:http'
import { createGateway } from '../src/app.js'
import { loadConfigFile } from '../src/config/load.js'
import { compileSnapshot } from '../src/http/snapshot.js'
import { createStore } from '../src/deps.js'
import { createForwarder } from '../src/http/proxy.js'
import { createLogger } from '../src/observe/log.js'
import { systemClock } from '../src/clock.js'

// The same gateway mounted behind a Hono app on @hono/node-server (one catch-all route that
// answers on the raw Node response), to measure what the Hono layer costs on the proxy port.
const [file, port] = process.argv.slice(2)
const loaded = await loadConfigFile(file!)
if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems))
const snap = compileSnapshot(loaded.config)
const logger = createLogger()
const { windows: store } = createStore(loaded.config, logger, systemClock)
const gateway = createGateway({
  snapshot: () => snap,
  store,
  forwarder: createForwarder({ url: loaded.config.upstream.url, clock: systemClock }),
  logger,
  upstreamUrl: loaded.config.upstream.url,
  clock: systemClock,
})
type Env = {
  Bindings: {
    incoming: import('node:http').IncomingMessage
    outgoing: import('node:http').ServerResponse
  }
}
const app = new Hono<Env>()
app.all('*', (c) => {
  gateway.handleRequest(c.env.incoming, c.env.outgoing)
  return RESPONSE_ALREADY_SENT
})
const server = createServer(getRequestListener(app.fetch, { autoCleanupIncoming: false }))
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ msg: 'listening', proxy: server.address() }) + '\n')
})
process.on('SIGTERM', () => process.exit(0))
