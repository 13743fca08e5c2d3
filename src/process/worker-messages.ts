import type { Metrics } from '../observe/metrics.js'
import type { SummaryCounts } from '../observe/summary.js'
import type { Config } from '../types.js'
import type { ProtectState } from '../protect/protector.js'
import type { StatusCounts } from '../observe/status-recorder.js'

// The primary and its workers speak over the cluster IPC channel (advanced serialisation, so
// a Config crosses whole: Infinity and all). Every message carries `bg`, so messages of other
// libraries on the same channel are left alone.

/** What the primary asks of every worker and collects: the answers are merged in the primary. */
export type Question = keyof Answers

/** What each worker answers to each question. */
export interface Answers {
  metrics: Awaited<ReturnType<Metrics['snapshot']>>
  summary: SummaryCounts
  flush: true
  protect: ProtectState
  status: StatusCounts
}

export type ToWorker =
  /** A reload the primary validated: run this configuration. */
  | { bg: 'config'; config: Config }
  | { bg: 'ask'; id: number; what: Question }
  /** SIGTERM reached the primary: drain and exit. */
  | { bg: 'drain' }
  /** A client connection, sent with the message as its handle (worker-pool.ts). */
  | { bg: 'conn'; id: number }

export type FromWorker =
  | { bg: 'answer'; id: number; value: unknown }
  /** Sent once the worker listens for messages (one sent before then would be lost). */
  | { bg: 'config?' }
  /** The worker's proxy is ready: send it connections. */
  | { bg: 'serving' }
  /** The worker took connection `id`: the primary closes its copy. */
  | { bg: 'took'; id: number }

export function isToWorker(m: unknown): m is ToWorker {
  return typeof m === 'object' && m !== null && typeof (m as { bg?: unknown }).bg === 'string'
}

export function isFromWorker(m: unknown): m is FromWorker {
  return (
    isToWorker(m) && ['answer', 'config?', 'serving', 'took'].includes((m as { bg: string }).bg)
  )
}
