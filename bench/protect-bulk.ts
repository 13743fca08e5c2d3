import { Agent, request } from 'node:http'

// bench/protect.ts's bulk client, in a process of its own: BULK_RATE calls a second to
// BULK_PATH for BULK_SECONDS, never more than BULK_OUTSTANDING open; prints its counts as JSON.

const port = Number(process.argv[2])
const rate = Number(process.env.BULK_RATE)
const seconds = Number(process.env.BULK_SECONDS)
const max = Number(process.env.BULK_OUTSTANDING)
const path = process.env.BULK_PATH!
const hungMs = Number(process.env.BULK_HUNG_MS)
const agent = new Agent({ keepAlive: true, maxSockets: max })
const counts = { calls: 0, s503: 0, ok: 0, hung: 0, other: 0, skipped: 0, retryAfterMissing: 0 }
let open = 0
const end = performance.now() + seconds * 1000

function one(): void {
  open++
  const req = request({ host: '127.0.0.1', port, path, agent, timeout: hungMs }, (res) => {
    res.resume()
    res.on('end', () => {
      open--
      counts.calls++
      if (res.statusCode === 200) counts.ok++
      else if (res.statusCode === 503) {
        counts.s503++
        if (res.headers['retry-after'] === undefined) counts.retryAfterMissing++
      } else counts.other++
    })
  })
  req.on('timeout', () => req.destroy(new Error('hung')))
  req.on('error', () => {
    open--
    counts.calls++
    counts.hung++
  })
  req.end()
}

const tick = setInterval(() => {
  if (performance.now() > end) {
    clearInterval(tick)
    const wait = setInterval(() => {
      if (open > 0) return
      clearInterval(wait)
      agent.destroy()
      process.stdout.write(JSON.stringify(counts) + '\n')
    }, 20)
    return
  }
  for (let i = 0; i < rate / 100; i++) {
    if (open >= max) counts.skipped++
    else one()
  }
}, 10)
