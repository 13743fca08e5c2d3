import cluster, { type Worker } from 'node:cluster'
import type { AddressInfo } from 'node:net'
import type { Logger } from '../observe/log.js'
import type { Config } from '../types.js'
import { isFromWorker, type Answers, type Question, type ToWorker } from './messages.js'

/** A worker that does not answer a question in this time is left out of the answer. */
const ASK_TIMEOUT_MS = 2_000
/** A worker that stopped on its own is replaced after this (a crash loop stays slow). */
const RESTART_DELAY_MS = 1_000
/** A worker must ask for its configuration and listen within this at start. */
const START_TIMEOUT_MS = 15_000

interface Pending {
  answers: unknown[]
  waiting: Set<number>
  timer: NodeJS.Timeout
  resolve(answers: unknown[]): void
}

/**
 * The primary's side of `workers: N` (issue #14): it forks the proxy processes, hands each the
 * running configuration, replaces one that dies, collects their metrics and summaries, and
 * drains them on SIGTERM. The proxy listener is the cluster's shared one, and each worker
 * accepts from it (SCHED_NONE, see start()).
 */
export class WorkerPool {
  private readonly listening = new Set<number>()
  private readonly pending = new Map<number, Pending>()
  private nextQuestion = 0
  private stopping = false
  private address: AddressInfo | null = null

  constructor(
    private readonly count: number,
    private readonly config: () => Config,
    private readonly logger: Logger
  ) {}

  /** Workers currently serving. */
  get serving(): number {
    return this.listening.size
  }

  /** Forks every worker; resolves with the shared proxy address once all of them listen. */
  start(): Promise<AddressInfo> {
    // Issue #22: the workers accept from the shared socket themselves (SCHED_NONE). Under
    // Node's round-robin policy the primary accepts and hands each connection over; one handed
    // to a worker that is killed before it takes it stays open in the primary, unanswered,
    // until its client gives up. Here a killed worker's connections close with it.
    cluster.schedulingPolicy = cluster.SCHED_NONE
    cluster.setupPrimary({ serialization: 'advanced' })
    cluster.on('message', (worker, m) => this.onAnswer(worker, m))
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the workers did not listen within ${START_TIMEOUT_MS} ms`)),
        START_TIMEOUT_MS
      )
      const onListening = (worker: Worker, address: AddressInfo): void => {
        this.listening.add(worker.id)
        this.address ??= address
        if (this.listening.size === this.count) {
          clearTimeout(timer)
          cluster.off('listening', onListening)
          cluster.on('listening', (w) => this.listening.add(w.id))
          cluster.off('exit', onEarlyExit)
          cluster.on('exit', (w, code, signal) => this.onExit(w, code, signal))
          resolve(this.address)
        }
      }
      // At start a worker that stops is a configuration or port problem every worker would
      // have: stop them all, rather than fork into the same failure.
      const onEarlyExit = (worker: Worker, code: number | null, signal: string | null): void => {
        clearTimeout(timer)
        reject(new Error(`worker ${worker.id} stopped at start (${signal ?? `exit ${code}`})`))
      }
      cluster.on('listening', onListening)
      cluster.on('exit', onEarlyExit)
      for (let i = 0; i < this.count; i++) this.fork()
    })
  }

  private fork(): void {
    cluster.fork({ BASEGATE_WORKER: '1' })
  }

  private onExit(worker: Worker, code: number | null, signal: string | null): void {
    this.listening.delete(worker.id)
    for (const [id, p] of this.pending) {
      p.waiting.delete(worker.id)
      if (p.waiting.size === 0) this.settle(id)
    }
    if (this.stopping) return
    this.logger.error(
      { worker: worker.id, pid: worker.process.pid, code, signal },
      'a worker stopped; starting another'
    )
    setTimeout(() => {
      if (!this.stopping) this.fork()
    }, RESTART_DELAY_MS).unref()
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
      const timer = setTimeout(() => this.settle(id), ASK_TIMEOUT_MS)
      timer.unref()
      // The worker answers `what` with Answers[Q] (workers/worker.ts): the IPC channel is untyped.
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
    const p = this.pending.get(m.id)
    if (p === undefined || !p.waiting.delete(worker.id)) return
    if (m.value !== null) p.answers.push(m.value)
    if (p.waiting.size === 0) this.settle(m.id)
  }

  private settle(id: number): void {
    const p = this.pending.get(id)
    if (p === undefined) return
    this.pending.delete(id)
    clearTimeout(p.timer)
    p.resolve(p.answers)
  }

  /** SIGTERM: every worker drains (SPEC §6); one still running past `ms` is killed. */
  async drain(ms: number): Promise<void> {
    this.stopping = true
    const all = this.workers()
    const exited = all.map(
      (w) =>
        new Promise<void>((resolve) => {
          if (w.isDead()) return resolve()
          w.once('exit', () => resolve())
        })
    )
    for (const w of all) this.send(w, { bg: 'drain' })
    const late = setTimeout(() => {
      for (const w of all) if (!w.isDead()) w.process.kill('SIGKILL')
    }, ms)
    await Promise.all(exited)
    clearTimeout(late)
  }
}
