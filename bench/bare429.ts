import { createServer } from 'node:http'

// Issue #26: the limit of a Node process that only refuses: every call an empty 429, nothing
// read, nothing counted, nothing logged. basegate's flood row is measured against it.
const port = Number(process.argv[2] ?? 0)
const server = createServer((_req, res) => {
  res.writeHead(429, { 'content-length': 0 })
  res.end()
})
server.keepAliveTimeout = 65_000
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(
    JSON.stringify({ listening: (server.address() as { port: number }).port }) + '\n'
  )
})
process.on('SIGTERM', () => process.exit(0))
