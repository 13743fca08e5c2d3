import { createServer } from 'node:http'

// The bench's upstream: answers like the service's list-rows endpoint, as fast as Node can.
const body = JSON.stringify({
  rows: [{ _id: 'AbCdEfGhIjKlMnOpQrStUv', Name: 'basegate', Count: 1 }],
})
const port = Number(process.argv[2] ?? 0)
const server = createServer((req, res) => {
  if (req.method === 'GET' || req.method === 'HEAD') {
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    })
    res.end(body)
    return
  }
  let n = 0
  req.on('data', (c: Buffer) => (n += c.length))
  req.on('end', () => {
    const out = JSON.stringify({ inserted_row_count: n > 0 ? 1 : 0, bytes: n })
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(out),
    })
    res.end(out)
  })
})
server.keepAliveTimeout = 65_000
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(
    JSON.stringify({ listening: (server.address() as { port: number }).port }) + '\n'
  )
})
process.on('SIGTERM', () => process.exit(0))
