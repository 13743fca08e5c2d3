#!/usr/bin/env node
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createDemoUpstream } from './demo-upstream.js'

// `npm run demo` (issue #25): the demo upstream on :8000, then basegate on :8080 with
// ./limits.yaml once the upstream listens: one command, nothing to install (npx did, for up to
// 20 s, so basegate started first and answered 502), no race between the two.

const PORT = 8000
const HOST = '127.0.0.1'
const server = createDemoUpstream()
server.once('error', (err: NodeJS.ErrnoException) => {
  const why =
    err.code === 'EADDRINUSE' ? 'is in use' : `cannot be used (${err.code ?? err.message})`
  process.stderr.write(
    `demo: port ${PORT} on ${HOST} ${why}; stop what uses it, or run basegate against your server\n`
  )
  process.exit(1)
})
server.listen(PORT, HOST, () => {
  process.stdout.write(`demo upstream (SeaTable-shaped answers) on http://${HOST}:${PORT}\n`)
  const main = fileURLToPath(new URL('./main.js', import.meta.url))
  const child = spawn(process.execPath, [main, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, BASEGATE_UPSTREAM: `http://${HOST}:${PORT}` },
  })
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal))
  child.on('exit', (code) => {
    server.close()
    process.exit(code ?? 0)
  })
})
