import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/observe/log.js'
import {
  createPlainLineWriter,
  PLAIN_FIELDS,
  type PlainLine,
} from '../../src/observe/request-line.js'

// Issue #14: the prepared request line writes the very bytes pino writes for the same fields.

function capture() {
  const lines: string[] = []
  const dest = new Writable({
    write(chunk, _e, cb) {
      lines.push(String(chunk))
      cb()
    },
  })
  // pino's destination for a plain Writable is the stream itself (sync writes).
  return { lines, logger: createLogger({ level: 'info', destination: dest }) }
}

const full: PlainLine = {
  method: 'GET',
  path: '/api-gateway/api/v2/dtables/6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10/rows/"quoted"\\é',
  class: 'base',
  key: 'base:6f1c2a4e0d3b4c599a513e2d7c8b9a10',
  limit: 500,
  remaining: 499,
  reset: 1795410020,
  team: 'acme',
  used: 12,
  quota: 30000,
  policy: 'list-rows "p"',
  status: 200,
  outcome: 'forwarded',
  store_ms: 0.42,
  store_time: 1795409960123,
  duration_ms: 1.25,
  delayed_ms: 950.5,
  upstream_ms: 0.87,
  api_change: 'dtable-server-removed',
  client_ip: '203.0.113.9',
  user_agent: 'seatable-api/2.8 "python"\\',
  request_id: 'req-7f3a',
  bytes_in: 0,
  bytes_out: 158,
}

const sparse: PlainLine = {
  ...full,
  limit: undefined,
  remaining: undefined,
  reset: undefined,
  team: undefined,
  used: undefined,
  quota: undefined,
  store_ms: undefined,
  store_time: undefined,
  upstream_ms: undefined,
  user_agent: undefined,
  bytes_in: undefined,
  api_change: undefined,
  class: 'other',
  key: 'ip:10.0.0.1',
}

describe('the prepared request line', () => {
  it.each([
    ['every field', full],
    ['an unlimited call (fields left out)', sparse],
  ])('%s: byte for byte what pino writes', (_name, line) => {
    const a = capture()
    const write = createPlainLineWriter(a.logger)!
    write(line)
    const b = capture()
    b.logger.info({ ...line }, 'request')
    const noTime = (s: string) => s.replace(/"time":\d+/, '"time":0')
    expect(a.lines).toHaveLength(1)
    expect(noTime(a.lines[0]!)).toBe(noTime(b.lines[0]!))
  })

  it('a refusal line at warn, with its message: byte for byte what pino writes', () => {
    const line = {
      ...sparse,
      status: 429,
      outcome: 'rate_limited',
      limit: 10,
      remaining: 0,
      reset: 1795410977,
    }
    const a = capture()
    createPlainLineWriter(a.logger)!(line, 'warn', 'refused: over limit')
    const b = capture()
    b.logger.warn({ ...line }, 'refused: over limit')
    const noTime = (s: string) => s.replace(/"time":\d+/, '"time":0')
    expect(noTime(a.lines[0]!)).toBe(noTime(b.lines[0]!))
  })

  it("the finish's ordinary line has exactly the list's fields, in its order", async () => {
    const { createFinisher } = await import('../../src/observe/request-log.js')
    const a = capture()
    const { systemClock } = await import('../../src/clock.js')
    const finish = createFinisher({ logger: a.logger, clock: systemClock })
    const g = {
      kind: 'refuse' as const,
      path: '/x',
      admission: null,
      apiChanges: [],
    } as unknown as Parameters<typeof finish>[0]
    const begun = {
      method: 'GET',
      startedMs: performance.now(),
      requestId: 'r1',
      userAgent: 'ua',
      peer: '127.0.0.1',
      bytesIn: undefined,
      bytesOut: 0,
      delayedMs: 12.5,
      givenBack: false,
    }
    finish(g, begun, { kind: 'rate_limited' })
    const keys = Object.keys(JSON.parse(a.lines[0]!)).filter(
      (k) => !['level', 'time', 'service', 'msg'].includes(k)
    )
    const order = PLAIN_FIELDS.map(([k]) => k as string)
    expect(keys.every((k) => order.includes(k))).toBe(true)
    expect(keys).toEqual(order.filter((k) => keys.includes(k)))
    expect(Object.keys(full).sort()).toEqual([...order].sort())
  })

  it('follows the level: nothing at warn', () => {
    const a = capture()
    a.logger.level = 'warn'
    createPlainLineWriter(a.logger)!(full)
    expect(a.lines).toEqual([])
  })
})
