import Fastify from 'fastify'
import proxy from '@fastify/http-proxy'
import rateLimit from '@fastify/rate-limit'
import { Redis } from 'ioredis'

// The peer an operator would otherwise pick in Node: fastify + @fastify/http-proxy +
// @fastify/rate-limit with its Redis store, keyed per base UUID like basegate. `defaults`
// gives ioredis as the plugin's README shows it; `pipelined` gives it the auto-pipelining
// basegate uses, so that row compares the gateways alone.
const [port, upstream, redisUrl, max, flavour] = process.argv.slice(2)
const redisOptions =
  flavour === 'pipelined'
    ? { enableAutoPipelining: true, connectTimeout: 1000, maxRetriesPerRequest: 1 }
    : {}
const uuidRe = /\/dtables\/([0-9a-f-]{32,36})/i

const app = Fastify({ logger: false })
await app.register(rateLimit, {
  max: Number(max),
  timeWindow: 60_000,
  redis: new Redis(redisUrl!, redisOptions),
  nameSpace: 'peer-',
  keyGenerator: (req) => uuidRe.exec(req.url)?.[1]?.replace(/-/g, '').toLowerCase() ?? req.ip,
})
await app.register(proxy, { upstream: upstream!, http: undefined })
await app.listen({ port: Number(port), host: '127.0.0.1' })
process.stdout.write(JSON.stringify({ listening: app.server.address() }) + '\n')
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)))
