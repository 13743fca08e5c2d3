import { IncomingMessage } from 'node:http'
import { Socket } from 'node:net'
import { parseConfig } from '../../src/config/load.js'
import { createGate } from '../../src/http/gate.js'
import { compileSnapshot } from '../../src/http/snapshot.js'
import { MemoryStore } from '../../src/limiter/memory-store.js'
import { FakeClock } from './clock.js'

/** A request head as the gate reads it (no body), from `remote`. */
export function requestOf(method: string, url: string, remote = '10.0.0.1'): IncomingMessage {
  const socket = new Socket()
  Object.defineProperty(socket, 'remoteAddress', { value: remote })
  const req = new IncomingMessage(socket)
  req.method = method
  req.url = url
  req.headers = { host: 'gw' }
  req.rawHeaders = ['host', 'gw']
  return req
}

/** The real gate on the memory store and the fake clock: admissions as the request path makes them. */
export function gateOf(yaml: string, clock = new FakeClock(Date.parse('2026-11-23T10:00:00Z'))) {
  const r = parseConfig(yaml, {})
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  const snap = compileSnapshot(r.config)
  const store = new MemoryStore()
  const gate = createGate({ snapshot: () => snap, store, clock })
  return { gate, store, clock, config: r.config, snapshot: snap }
}
