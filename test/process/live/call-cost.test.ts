import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { testYaml } from '../../helpers/gateway-process.js'
import { startLive } from '../../helpers/live.js'
import { send } from '../../helpers/http.js'
import { useRedis } from '../../helpers/redis.js'
import { useStubUpstream } from '../../helpers/stub-upstream.js'
import { APPEND_BODY, benchUuid as uuid } from '../../helpers/bench-calls.js'

// SPEC §12 "What a call costs", a guard that is not a clock: the benchmark's three calls
// (rotating bases, a flood on one base over its limit, a 1,000-row append) through the real
// gateway and the real scripts, every command the store receives seen by MONITOR: those the
// gateway sends (each at most a round trip; a turn's scripts go in one write) and those
// its scripts run inside Redis. The counts include the batched writes of the usage days, the
// upgrade report and the tuning evidence (flushed at the stop), the store's health probe and
// nothing else. A change that makes a call do more fails here; raising a budget is said in the
// CHANGELOG with why (SPEC §12).

/**
 * Per call, measured on 0.7.0 (in brackets) with about 10 % of room. Each base is called once,
 * so every check opens its key's bucket (the script's costliest case: TIME, HMGET, HSET and
 * PEXPIRE); the benchmark, calling 1,000 bases over and over, sees about 4.2 commands a call.
 */
const BUDGETS = {
  // [1.00 scripts, 1.01 sent, 5.03 in all]: the check script, and the day counts' share of a
  // batched write (at the stop: one EVAL of the usage script and its HSETs for the class's others).
  rotating: { scriptsPerCall: 1.0, sentPerCall: 1.1, commandsPerCall: 5.5 },
  // [0.014 scripts, 0.026–0.031 sent, 0.095 in all]: a refusal of a key known to be over its
  // limit asks the store nothing; the 10 admitted and the first refusal do. What the batched
  // writers and the store probe send depends on how long the run takes (a flush every 2 s, a
  // probe every 5 s), so the room is for them: one store call per refusal would be 1.0.
  flood: { scriptsPerCall: 0.03, sentPerCall: 0.06, commandsPerCall: 0.2 },
  // [1.01, 1.05, 5.16]: as rotating (200 calls share the same batched write): the body's size
  // check costs the store nothing.
  append: { scriptsPerCall: 1.0, sentPerCall: 1.1, commandsPerCall: 5.7 },
} as const

const N = { rotating: 1000, flood: 1000, append: 200 }

interface Count {
  /** Commands the gateway sent (EVALSHA, EVAL, HSET…): its round trips at most. */
  sent: number
  /** Of those, script calls (EVALSHA / EVAL). */
  scripts: number
  /** Every command Redis ran, those inside scripts counted. */
  commands: number
  byName: Map<string, number>
}

/** Sends `calls` with 10 in flight, every command to the store counted from the first to the stop. */
async function counted(
  redisUrl: string,
  yaml: string,
  calls: { method: string; path: string; body?: string }[],
  expectStatus: (status: number, i: number) => void
): Promise<Count> {
  const gw = await startLive(yaml, { env: { LOG_LEVEL: 'info' } })
  // Warm: scripts loaded, the first connection made, before counting starts.
  await send(gw.port, { path: `/api-gateway/api/v2/dtables/${uuid(0xfffff)}/rows/` })
  // No ready check: its INFO, echoed as a MONITOR line while ioredis's monitor connection was
  // still being set up, once failed the run ("Command queue state error", last reply "info").
  const monitorClient = new Redis(redisUrl, { enableReadyCheck: false })
  const monitor = await monitorClient.monitor()
  const count: Count = { sent: 0, scripts: 0, commands: 0, byName: new Map() }
  // Sent from another connection once the gateway has stopped: MONITOR tells commands in the
  // order Redis ran them, so every command of the run is counted once the marker is seen.
  const marker = `call-cost-end:${process.pid}:${Date.now()}`
  let markerSeen = () => {}
  const ended = new Promise<void>((r) => (markerSeen = r))
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const name = String(args[0]).toLowerCase()
    if (name === 'echo' && args[1] === marker) return markerSeen()
    count.commands++
    count.byName.set(name, (count.byName.get(name) ?? 0) + 1)
    if (source === 'lua') return
    count.sent++
    if (name === 'evalsha' || name === 'eval') count.scripts++
  })
  // MONITOR starts once the server has said OK; one round trip more makes sure.
  await monitorClient.ping().catch(() => {})
  let next = 0
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (next < calls.length) {
        const i = next++
        const c = calls[i]!
        const headers = c.body === undefined ? {} : { 'content-type': 'application/json' }
        const a = await send(gw.port, { method: c.method, path: c.path, body: c.body, headers })
        expectStatus(a.status, i)
      }
    })
  )
  expect(await gw.stop()).toBe(0) // the stop writes every batch held
  const other = new Redis(redisUrl)
  await other.echo(marker)
  other.disconnect()
  await ended
  monitorClient.disconnect()
  return count
}

function perCall(c: Count, n: number) {
  return { scripts: c.scripts / n, sent: c.sent / n, commands: c.commands / n }
}

describe('what a call costs the store (SPEC §12)', () => {
  const up = useStubUpstream()
  const store = useRedis({ own: true })
  const yamlFor = (prefix: string, base: string) =>
    testYaml(
      up.url,
      `store: { url: "${store.redis.url}", prefix: "${store.redis.prefix}${prefix}:" }\nrate_limits: { base: ${base} }`
    )

  it(`rotating: ${N.rotating} GETs on ${N.rotating} bases, nothing refused`, async () => {
    const calls = Array.from({ length: N.rotating }, (_, i) => ({
      method: 'GET',
      path: `/api-gateway/api/v2/dtables/${uuid(i + 1)}/rows/?table_name=Table1`,
    }))
    const c = await counted(store.redis.url, yamlFor('rot', '10000000/min'), calls, (s) =>
      expect(s).toBe(200)
    )
    const p = perCall(c, N.rotating)
    process.stderr.write(
      `rotating per call: ${JSON.stringify(p)} ${JSON.stringify([...c.byName])}\n`
    )
    expect(p.scripts).toBeGreaterThanOrEqual(1) // every admitted call is checked by the store
    expect(p.scripts).toBeLessThanOrEqual(BUDGETS.rotating.scriptsPerCall + 0.02)
    expect(p.sent).toBeLessThanOrEqual(BUDGETS.rotating.sentPerCall)
    expect(p.commands).toBeLessThanOrEqual(BUDGETS.rotating.commandsPerCall)
  }, 60_000)

  it(`flood: ${N.flood} GETs on one base over its limit of 10 a minute`, async () => {
    const calls = Array.from({ length: N.flood }, () => ({
      method: 'GET',
      path: `/api-gateway/api/v2/dtables/${uuid(7)}/rows/?table_name=Table1`,
    }))
    let admitted = 0
    const c = await counted(store.redis.url, yamlFor('flood', '10/min'), calls, (s) => {
      expect([200, 429]).toContain(s)
      if (s === 200) admitted++
    })
    expect(admitted).toBe(10)
    const p = perCall(c, N.flood)
    process.stderr.write(`flood per call: ${JSON.stringify(p)} ${JSON.stringify([...c.byName])}\n`)
    expect(p.scripts).toBeLessThanOrEqual(BUDGETS.flood.scriptsPerCall)
    expect(p.sent).toBeLessThanOrEqual(BUDGETS.flood.sentPerCall)
    expect(p.commands).toBeLessThanOrEqual(BUDGETS.flood.commandsPerCall)
  }, 60_000)

  it(`append: ${N.append} POSTs of 1,000 rows (${APPEND_BODY.length} bytes) on ${N.append} bases`, async () => {
    const calls = Array.from({ length: N.append }, (_, i) => ({
      method: 'POST',
      path: `/api-gateway/api/v2/dtables/${uuid(i + 1)}/rows/`,
      body: APPEND_BODY,
    }))
    const c = await counted(store.redis.url, yamlFor('append', '10000000/min'), calls, (s) =>
      expect(s).toBe(200)
    )
    const p = perCall(c, N.append)
    process.stderr.write(`append per call: ${JSON.stringify(p)} ${JSON.stringify([...c.byName])}\n`)
    expect(p.scripts).toBeGreaterThanOrEqual(1)
    expect(p.scripts).toBeLessThanOrEqual(BUDGETS.append.scriptsPerCall + 0.02)
    expect(p.sent).toBeLessThanOrEqual(BUDGETS.append.sentPerCall)
    expect(p.commands).toBeLessThanOrEqual(BUDGETS.append.commandsPerCall)
  }, 60_000)
})
