#!/usr/bin/env node
import { spawn } from 'node:child_process'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { createDemoUpstream } from './demo-upstream.js'

// `npm run demo` (issue #25): the demo upstream on :8000, then basegate on :8080 with
// ./limits.yaml once the upstream listens: one command, nothing to install (npx did, for up to
// 20 s, so basegate started first and answered 502), no race between the two.

// Issue #34: every port can move. The upstream's with --upstream-port N (or DEMO_UPSTREAM_PORT;
// 0: any free one); the proxy's with --port N; the admin listener's with BASEGATE_ADMIN_PORT.
const args = process.argv.slice(2)
const at = args.indexOf('--upstream-port')
const given = at === -1 ? process.env.DEMO_UPSTREAM_PORT : args.splice(at, 2)[1]
const PORT = given === undefined || given === '' ? 8000 : Number(given)
if (!Number.isInteger(PORT) || PORT < 0 || PORT > 65535) {
  process.stderr.write(`demo: --upstream-port ${JSON.stringify(given)} is not a port\n`)
  process.exit(2)
}
const HOST = '127.0.0.1'
const server = createDemoUpstream()
server.once('error', (err: NodeJS.ErrnoException) => {
  const why =
    err.code === 'EADDRINUSE' ? 'is in use' : `cannot be used (${err.code ?? err.message})`
  process.stderr.write(
    `demo: port ${PORT} on ${HOST} ${why}; move the demo upstream with --upstream-port N (the proxy with --port N, the admin listener with BASEGATE_ADMIN_PORT=N), or stop what uses it\n`
  )
  process.exit(1)
})
server.listen(PORT, HOST, () => {
  const port = (server.address() as AddressInfo).port
  process.stdout.write(`demo upstream (SeaTable-shaped answers) on http://${HOST}:${port}\n`)
  const main = fileURLToPath(new URL('./main.js', import.meta.url))
  const child = spawn(process.execPath, [main, ...args], {
    stdio: 'inherit',
    env: { ...process.env, BASEGATE_UPSTREAM: `http://${HOST}:${port}` },
  })
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal))
  child.on('exit', (code) => {
    server.close()
    process.exit(code ?? 0)
  })
})
