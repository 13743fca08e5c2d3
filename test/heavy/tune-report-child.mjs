// The child of tuning-report.test.ts: one 35-day report over the store it is given, timed, in a
// process of its own (run with --trace-gc, so the parent reads the live heap after each full
// collection). Prints one JSON line: its time, and what the report said.
import { Redis } from 'ioredis'
import { parseConfig } from '../../dist/src/config/load.js'
import { compileSnapshot } from '../../dist/src/http/snapshot.js'
import { tuneReport } from '../../dist/src/tuning/report.js'
import { RedisShapeStore } from '../../dist/src/tuning/shape-store.js'

const [url, prefix] = process.argv.slice(2)
const client = new Redis(url)
const running = compileSnapshot(parseConfig('{}').config)
const candidate = compileSnapshot(parseConfig('rate_limits: { base: 30/min }').config)
const started = performance.now()
const r = await tuneReport({
  running,
  candidate,
  store: new RedisShapeStore(client, prefix),
  days: 35,
  nowMs: Date.now(),
})
const ms = performance.now() - started
client.disconnect()
process.stdout.write(
  JSON.stringify({ ms, series: r.series_read, keys: r.sections[0]?.keys ?? 0 }) + '\n'
)
