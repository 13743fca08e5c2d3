import { type Clock, type Timer } from '../clock.js'
import cluster, { type Worker } from 'node:cluster'
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net'
import type { Logger } from '../observe/log.js'
import type { Config } from '../types.js'
import { isFromWorker, type Answers, type Question, type ToWorker } from './worker-messages.js'

/** A worker that does not answer a question in this time is left out of the answer. */
const ASK_TIMEOUT_MS = 2_000
/** A worker that stopped on its own is replaced after this (a crash loop stays slow). */
const RESTART_DELAY_MS = 1_000
/** A worker must ask for its configuration and listen within this at start. */
const START_TIMEOUT_MS = 15_000

interface Pending {
  answers: unknown[]
  waiting: Set<number>
  timer: Timer
  resolve(answers: unknown[]): void
}

/**
 * The primary's side of `workers: N` (issue #14): it forks the proxy processes, hands each the
 * running configuration, replaces one that dies, collects their metrics and summaries, and
 * drains them on SIGTERM.
 *
 * The proxy listener is the primary's: it accepts each connection (paused, reading nothing)
 * and hands it to the next serving worker, round robin, as Node's own cluster scheduling does,
 * which spreads load evenly where the kernel's wake-ups would not (with workers accepting from
 * a shared socket, one of two took all 60 calls of a burst). Like Node's, the primary keeps
 * its copy of a connection until the worker says it took it; unlike Node's (issue #22), it
 * closes the copies a worker killed in between never took (Node's kept them open, unanswered,
 * until their clients gave up). While no worker serves, connections are closed.
 */
export class WorkerPool {
  private readonly listening = new Set<number>()
  private readonly pending = new Map<number, Pending>()
  private nextQuestion = 0
  private stopping = false
  private server: Server | null = null
  /** Where the round robin stands in the serving workers. */
  private turn = 0
  /** Connections sent to each worker that it has not yet said it took, by their id. */
  private readonly inFlight = new Map<number, Map<number, Socket>>()
  private nextConn = 0

  constructor(
    private readonly count: number,
    private readonly config: () => Config,
    private readonly logger: Logger,
    private readonly clock: Clock
  ) {}

  /** Workers currently serving. */
  get serving(): number {
    return this.listening.size
  }

  /** Listens, forks every worker; resolves with the proxy address once all of them serve. */
  async start(): Promise<AddressInfo> {
    cluster.setupPrimary({ serialization: 'advanced' })
    cluster.on('message', (worker, m) => this.onAnswer(worker, m))
    const { host, port } = this.config().listen
    const server = createServer({ pauseOnConnect: true }, (socket) => this.handOff(socket))
    this.server = server
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => {
        server.off('error', reject)
        resolve()
      })
    })
    server.on('error', (err) => this.logger.error({ err }, 'the proxy listener failed'))
    await new Promise<void>((resolve, reject) => {
      const timer = this.clock.setTimer(
        () => reject(new Error(`the workers did not serve within ${START_TIMEOUT_MS} ms`)),
        START_TIMEOUT_MS
      )
      this.allServing = () => {
        timer.cancel()
        cluster.off('exit', onEarlyExit)
        cluster.on('exit', (w, code, signal) => this.onExit(w, code, signal))
        resolve()
      }
      // At start a worker that stops is a configuration problem every worker would have: stop
      // them all, rather than fork into the same failure.
      const onEarlyExit = (worker: Worker, code: number | null, signal: string | null): void => {
        timer.cancel()
        reject(new Error(`worker ${worker.id} stopped at start (${signal ?? `exit ${code}`})`))
      }
      cluster.on('exit', onEarlyExit)
      for (let i = 0; i < this.count; i++) this.fork()
    })
    return server.address() as AddressInfo
  }

  /** Called once every worker serves at start. */
  private allServing: (() => void) | null = null

  /** The next serving worker takes the connection; with none, it is closed (a reset, no hang). */
  private handOff(socket: Socket): void {
    const ids = [...this.listening]
    for (let tries = 0; tries < ids.length; tries++) {
      const worker = cluster.workers?.[ids[this.turn++ % ids.length]!]
      if (worker === undefined || !worker.isConnected()) continue
      try {
        // The primary keeps its copy until the worker says it took the connection ('took'),
        // then closes it; if the worker dies first, onExit closes it (the client sees a reset).
        const id = this.nextConn++
        let sent = this.inFlight.get(worker.id)
        if (sent === undefined) this.inFlight.set(worker.id, (sent = new Map()))
        sent.set(id, socket)
        worker.send({ bg: 'conn', id }, socket, { keepOpen: true }, (err) => {
          if (err) {
            sent.delete(id)
            socket.destroy()
          }
        })
        return
      } catch {
        /* the channel closed meanwhile: try the next */
      }
    }
    socket.destroy()
  }

  private fork(): void {
    cluster.fork({ BASEGATE_WORKER: '1' })
  }

  private onExit(worker: Worker, code: number | null, signal: string | null): void {
    this.listening.delete(worker.id)
    // Connections it never took are closed (their clients see a reset, not a hang).
    for (const socket of this.inFlight.get(worker.id)?.values() ?? []) socket.destroy()
    this.inFlight.delete(worker.id)
    for (const [id, p] of this.pending) {
      p.waiting.delete(worker.id)
      if (p.waiting.size === 0) this.settle(id)
    }
    if (this.stopping) return
    this.logger.error(
      { worker: worker.id, pid: worker.process.pid, code, signal },
      'a worker stopped; starting another'
    )
    this.clock.setTimer(() => {
      if (!this.stopping) this.fork()
    }, RESTART_DELAY_MS)
  }

  private send(worker: Worker, m: ToWorker): boolean {
    if (!worker.isConnected()) return false
    try {
      worker.send(m)
      return true
    } catch {
      return false
    }
  }

  private workers(): Worker[] {
    return Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined)
  }

  /** A reload the primary applied: every worker runs it from its next request. */
  broadcastConfig(config: Config): void {
    for (const w of this.workers()) this.send(w, { bg: 'config', config })
  }

  /** Asks every serving worker; the answers that came within ASK_TIMEOUT_MS. */
  ask<Q extends Question>(what: Q): Promise<Answers[Q][]> {
    const id = this.nextQuestion++
    return new Promise((resolve) => {
      const waiting = new Set<number>()
      for (const w of this.workers()) {
        if (this.listening.has(w.id) && this.send(w, { bg: 'ask', id, what })) waiting.add(w.id)
      }
      const timer = this.clock.setTimer(() => this.settle(id), ASK_TIMEOUT_MS)
      // The worker answers `what` with Answers[Q] (worker-link.ts): the IPC channel is untyped.
      this.pending.set(id, {
        answers: [],
        waiting,
        timer,
        resolve: resolve as (answers: unknown[]) => void,
      })
      if (waiting.size === 0) this.settle(id)
    })
  }

  private onAnswer(worker: Worker, m: unknown): void {
    if (!isFromWorker(m)) return
    if (m.bg === 'config?') {
      this.send(worker, { bg: 'config', config: this.config() })
      return
    }
    if (m.bg === 'took') {
      // The worker holds the connection now: the primary's copy goes (the connection stays).
      const sent = this.inFlight.get(worker.id)
      sent?.get(m.id)?.destroy()
      sent?.delete(m.id)
      return
    }
    if (m.bg === 'serving') {
      this.listening.add(worker.id)
      if (this.listening.size === this.count && this.allServing !== null) {
        this.allServing()
        this.allServing = null
      }
      return
    }
    const p = this.pending.get(m.id)
    if (p === undefined || !p.waiting.delete(worker.id)) return
    if (m.value !== null) p.answers.push(m.value)
    if (p.waiting.size === 0) this.settle(m.id)
  }

  private settle(id: number): void {
    const p = this.pending.get(id)
    if (p === undefined) return
    this.pending.delete(id)
    p.timer.cancel()
    p.resolve(p.answers)
  }

  /** SIGTERM: every worker drains (SPEC §6); one still running past `ms` is killed. */
  async drain(ms: number): Promise<void> {
    this.stopping = true
    // No new connection; those handed over finish in their workers.
    this.server?.close()
    const all = this.workers()
    const exited = all.map(
      (w) =>
        new Promise<void>((resolve) => {
          if (w.isDead()) return resolve()
          w.once('exit', () => resolve())
        })
    )
    for (const w of all) this.send(w, { bg: 'drain' })
    const late = this.clock.setTimer(() => {
      for (const w of all) if (!w.isDead()) w.process.kill('SIGKILL')
    }, ms)
    await Promise.all(exited)
    late.cancel()
  }
}
