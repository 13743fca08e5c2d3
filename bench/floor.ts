import { Agent, createServer, request } from 'node:http'
import { Redis } from 'ioredis'

// Issue #26: the one-trip floor, hand-rolled: node:http, one EVALSHA per call (a fixed window
// per base UUID, auto-pipelined as basegate's are), then the call forwarded on a keep-alive
// pool or an empty 429. No log, no metrics, no headers of its own: what any rate-limiting proxy
// that asks Redis once per call must at least spend.
const [port, upstream, redisUrl, max] = process.argv.slice(2)
const limit = Number(max)
const redis = new Redis(redisUrl!, { enableAutoPipelining: true })
const SCRIPT = `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`
const sha = (await redis.script('LOAD', SCRIPT)) as string
const up = new URL(upstream!)
const agent = new Agent({ keepAlive: true, maxSockets: 256 })
const uuidRe = /\/dtables\/([0-9a-f-]{32,36})/i

const server = createServer((req, res) => {
  const base = uuidRe.exec(req.url ?? '')?.[1] ?? req.socket.remoteAddress ?? ''
  const windowStart = Math.floor(Date.now() / 60_000)
  ;(redis.evalsha(sha, 1, `floor:${base}:${windowStart}`, 60_000) as Promise<number>).then(
    (n) => {
      if (n > limit) {
        res.writeHead(429, { 'content-length': 0 })
        res.end()
        return
      }
      const out = request(
        {
          host: up.hostname,
          port: up.port,
          path: req.url,
          method: req.method,
          headers: req.headers,
          agent,
        },
        (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.headers)
          upRes.pipe(res)
        }
      )
      out.on('error', () => {
        if (!res.headersSent) res.writeHead(502, { 'content-length': 0 })
        res.end()
      })
      req.pipe(out)
    },
    () => {
      res.writeHead(503, { 'content-length': 0 })
      res.end()
    }
  )
})
server.keepAliveTimeout = 65_000
server.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(
    JSON.stringify({ listening: (server.address() as { port: number }).port }) + '\n'
  )
})
process.on('SIGTERM', () => process.exit(0))
