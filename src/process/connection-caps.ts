import { readFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Socket } from 'node:net'
import type { Clock } from '../clock.js'
import type { Snapshot } from '../http/snapshot.js'
import { jsonError } from '../http/respond.js'
import type { Logger } from '../observe/log.js'
import type { Metrics } from '../observe/metrics.js'
import { peerAddress } from '../request/client-ip.js'
import { MAX_PIPELINED } from './pipelined.js'
import type { Config } from '../types.js'

// SPEC §4 "Connections": at most listen.max_connections client connections at once, and at
// most listen.max_connections_per_client from one client IP (a trusted proxy's connections
// carry many clients: only the total caps them). A connection past either is closed at once;
// when its head arrives within 1 s it is answered 503 with retry-after first, so a client
// sees why (nginx's limit_conn answers 503 too). HAProxy's maxconn and Envoy's overload
// manager bound the same thing: a process out of file descriptors drops everyone.

/** How long a connection past a cap may take to send its head before it is closed unanswered. */
export const REFUSED_HEAD_MS = 1_000
/** A client past a cap is logged at most once in this. */
const LOG_EVERY_MS = 60_000
/** Clients remembered for that (then forgotten at once: a log line more, never memory). */
const LOG_MEMORY = 10_000

export const CONNECTION_MESSAGE =
  'too many connections are open (listen.max_connections or listen.max_connections_per_client); try again shortly'

export const PIPELINED_MESSAGE = `more than ${MAX_PIPELINED} pipelined requests waited on one connection; send the rest on a new connection`

export type ConnectionCap = 'max_connections' | 'max_connections_per_client' | 'pipelined'

/** The soft limit on open files of this process (Linux: /proc/self/limits); null when unknown. */
export function openFileLimit(
  read: () => string = () => readFileSync('/proc/self/limits', 'utf8')
): number | null {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(read())
    if (m === null) return null
    return m[1] === 'unlimited' ? null : Number(m[1])
  } catch {
    return null
  }
}

/** File descriptors the store may use: a command connection and a subscriber per node, and spares. */
function storeConnections(store: Config['store']): number {
  if (store.cluster.length > 0) return 4 * Math.max(3, store.cluster.length) + 8
  return store.url === '' ? 0 : 8
}

/**
 * This process's caps (SPEC §4): `auto` is 90 % of the open-file limit less the upstream pool
 * and the store's connections; with workers each takes its share of both numbers (the primary
 * hands connections round robin, so one client's spread over the workers).
 */
export function connectionCaps(
  config: Config,
  processes: number,
  nofile: number | null
): { total: number; perClient: number } {
  const n = Math.max(1, processes)
  const { maxConnections, maxConnectionsPerClient } = config.listen
  let total: number
  if (maxConnections === 'auto') {
    const files = nofile ?? 1024
    const own =
      Math.floor(files * 0.9) - config.upstream.maxConnections - storeConnections(config.store)
    total = Math.max(16, own)
  } else total = Math.max(1, Math.ceil(maxConnections / n))
  return { total, perClient: Math.max(1, Math.ceil(maxConnectionsPerClient / n)) }
}

export interface CapDeps {
  caps: () => { total: number; perClient: number }
  snapshot: () => Snapshot
  clock: Clock
  logger: Logger
  metrics?: Metrics
}

/** One client's connections: how many, and which of them have no call in progress. */
interface Held {
  count: number
  idle: Set<Socket>
}

/**
 * A counted connection: its calls in progress (none: idle) and its client's entry (null for a
 * trusted proxy's). One record a connection, so a call's start and end each look it up once
 * (SPEC §12), not a count, a client and the client's entry apart.
 */
interface Conn {
  calls: number
  client: string | null
  held: Held | null
}

/** How long a refused connection that sent nothing is kept for its head (then closed unanswered). */
export const REFUSED_SILENT_MS = 100

export class ConnectionCaps {
  private open = 0
  private readonly byClient = new Map<string, Held>()
  /** Connections past a cap: their request is answered 503, then they close. */
  private readonly refused = new WeakSet<Duplex>()
  /** Refused connections whose 503 is being written (they close once it is). */
  private readonly answering = new WeakSet<Duplex>()
  /** The counted connections (a connection with no call in progress is idle). */
  private readonly conns = new WeakMap<Duplex, Conn>()
  /** Connections that yielded: counted out when they were chosen, not again at their close. */
  private readonly countedOut = new WeakSet<Duplex>()
  private readonly logged = new Map<string, number>()
  /** Idle connections closed to make room for a newcomer at the total. */
  yielded = 0

  constructor(private readonly deps: CapDeps) {
    deps.metrics?.watchConnections(() => this.open)
  }

  /** Connections counted now (refused ones are not). */
  get count(): number {
    return this.open
  }

  /**
   * A new client connection: counted until it closes. At the total, an idle connection of the
   * client that holds the most yields to it (SPEC §4); past a cap with none idle, refused.
   */
  admit(socket: Socket): void {
    const peer = peerAddress(socket.remoteAddress)
    const { clientIp } = this.deps.snapshot()
    const key = clientIp.isTrusted(peer) ? null : clientIp.keyOf(peer)
    const caps = this.deps.caps()
    const held = key === null ? undefined : this.byClient.get(key)
    if (held !== undefined && held.count >= caps.perClient)
      return this.refuse(socket, 'max_connections_per_client', key!)
    if (this.open >= caps.total && !this.yieldOne(key))
      return this.refuse(socket, 'max_connections', key ?? peer)
    this.open++
    let h: Held | null = null
    if (key !== null) {
      h = held ?? null
      if (h === null) this.byClient.set(key, (h = { count: 0, idle: new Set() }))
      h.count++
      h.idle.add(socket)
    }
    this.conns.set(socket, { calls: 0, client: key, held: h })
    // Its client's entry stays while the connection is counted (a yielded one is counted out).
    socket.once('close', () => {
      if (this.countedOut.has(socket)) return
      this.open--
      if (h === null) return
      h.idle.delete(socket)
      if (--h.count <= 0) this.byClient.delete(key!)
    })
  }

  /**
   * Closes an idle connection (no call in progress) of the client holding the most, other than
   * the newcomer's own; false when none is idle. A keep-alive connection left open costs its
   * client a new handshake at most; a newcomer refused costs it the call.
   */
  private yieldOne(newcomer: string | null): boolean {
    let victim: Socket | undefined
    let client = ''
    let h: Held | undefined
    for (const [c, held] of this.byClient) {
      if (held.idle.size === 0 || held.count <= (h?.count ?? 0) || c === newcomer) continue
      client = c
      h = held
      victim = held.idle.values().next().value
    }
    if (victim === undefined || h === undefined) return false
    // Counted out now (its close event comes later): the newcomer takes its place at once.
    h.idle.delete(victim)
    if (--h.count <= 0) this.byClient.delete(client)
    this.open--
    this.countedOut.add(victim)
    victim.destroy()
    this.yielded++
    this.deps.metrics?.connectionsYielded.inc()
    return true
  }

  /**
   * A call began on the connection: it is no longer idle. (Its client's entry lives as long as
   * one of its connections is counted; a connection that yielded is closed, never idle again.)
   */
  began(socket: Duplex): void {
    const c = this.conns.get(socket)
    if (c !== undefined && c.calls++ === 0) c.held?.idle.delete(socket as Socket)
  }

  /** A call on the connection ended; with none left it is idle again. */
  ended(socket: Duplex): void {
    const c = this.conns.get(socket)
    if (c === undefined || c.calls === 0) return
    if (--c.calls === 0 && !socket.destroyed) c.held?.idle.add(socket as Socket)
  }

  /**
   * Past a cap: closed at once when it sent nothing (within REFUSED_SILENT_MS), else answered
   * 503 when its head comes within REFUSED_HEAD_MS, and closed as soon as that is written.
   */
  private refuse(socket: Socket, cap: ConnectionCap, client: string): void {
    this.refused.add(socket)
    this.deps.metrics?.connectionsRefused.labels(cap).inc()
    // A timer runs before the loop's I/O: on a loop running late, a head that has arrived is
    // still in the kernel's buffer when it fires, and closing then sends the client a reset
    // instead of its 503. So each check waits for the I/O pass that reads what has arrived.
    const afterIo = (close: () => void) => () => void setImmediate(close)
    const silent = this.deps.clock.setTimer(
      afterIo(() => {
        if (socket.bytesRead === 0) socket.destroy()
      }),
      REFUSED_SILENT_MS
    )
    const timer = this.deps.clock.setTimer(
      afterIo(() => {
        if (!this.answering.has(socket)) socket.destroy()
      }),
      REFUSED_HEAD_MS
    )
    socket.once('close', () => {
      silent.cancel()
      timer.cancel()
    })
    const caps = this.deps.caps()
    this.logOnce(client, cap, cap === 'max_connections' ? caps.total : caps.perClient)
  }

  /**
   * A pipelined request past those a connection may have waiting (pipelined.ts), in its turn:
   * 503, and the connection closes (the requests after it are never started).
   */
  refusePipelined(req: IncomingMessage, res: ServerResponse): void {
    const socket = req.socket
    this.deps.metrics?.connectionsRefused.labels('pipelined').inc()
    const client = this.conns.get(socket)?.client ?? peerAddress(socket.remoteAddress)
    this.logOnce(client, 'pipelined', MAX_PIPELINED)
    const { headers, body } = jsonError(PIPELINED_MESSAGE, {
      'retry-after': '1',
      connection: 'close',
    })
    res.writeHead(503, headers)
    res.end(body)
  }

  private logOnce(client: string, cap: ConnectionCap, limit: number): void {
    const now = this.deps.clock.monotonic()
    const last = this.logged.get(client)
    if (last !== undefined && now - last < LOG_EVERY_MS) return
    if (this.logged.size >= LOG_MEMORY) this.logged.clear()
    this.logged.set(client, now)
    this.deps.logger.warn(
      { client, cap, limit },
      'a connection past a cap was closed (logged once a minute per client)'
    )
  }

  /** Whether the connection was refused: its request gets the 503 and the connection closes. */
  isRefused(socket: Duplex): boolean {
    return this.refused.has(socket)
  }

  /** The 503 of a refused connection's request, then the connection closes. */
  answer(req: IncomingMessage, res: ServerResponse): void {
    const { headers, body } = jsonError(CONNECTION_MESSAGE, {
      'retry-after': '1',
      connection: 'close',
    })
    this.answering.add(req.socket)
    res.writeHead(503, headers)
    res.end(body, () => req.socket.destroy())
  }

  /** The same for an upgrade's raw socket. */
  answerRaw(socket: Duplex): void {
    const { headers, body } = jsonError(CONNECTION_MESSAGE, {
      'retry-after': '1',
      connection: 'close',
    })
    let head = 'HTTP/1.1 503 Service Unavailable\r\n'
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${String(v)}\r\n`
    if (!socket.writable) return void socket.destroy()
    this.answering.add(socket)
    socket.end(head + '\r\n' + body, () => socket.destroy())
  }
}
