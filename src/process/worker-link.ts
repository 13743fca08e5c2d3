import type { Clock } from '../clock.js'
import type { Socket } from 'node:net'
import type { Config } from '../types.js'
import { isToWorker, type Question } from './worker-messages.js'

/** What a worker process does for its primary. */
export interface WorkerHooks {
  adopt(config: Config): void
  answer(what: Question): Promise<unknown>
  drain(source: string): void
  /** A client connection the primary handed over. */
  connection(socket: Socket): void
}

/**
 * A worker boots from the configuration its primary validated, never from the file: the
 * primary is the one reader of limits.yaml, so a worker started after a reload (a replacement)
 * runs what the others run, restart-only settings included.
 */
export function receiveConfig(timeoutMs: number, clock: Clock): Promise<Config> {
  return new Promise((resolve, reject) => {
    const timer = clock.setTimer(() => {
      process.off('message', onMessage)
      reject(new Error(`no configuration from the primary within ${timeoutMs} ms`))
    }, timeoutMs)
    const onMessage = (m: unknown): void => {
      if (!isToWorker(m) || m.bg !== 'config') return
      timer.cancel()
      process.off('message', onMessage)
      resolve(m.config)
    }
    process.on('message', onMessage)
    process.send?.({ bg: 'config?' })
  })
}

/** Serves the primary's messages; a primary that goes away (killed) drains this worker. */
export function serveWorker(hooks: WorkerHooks): void {
  process.on('message', (m: unknown, handle: unknown) => {
    if (!isToWorker(m)) return
    if (m.bg === 'conn') {
      if (handle === undefined) return
      hooks.connection(handle as Socket)
      if (process.connected) process.send?.({ bg: 'took', id: m.id })
    } else if (m.bg === 'config') hooks.adopt(m.config)
    else if (m.bg === 'drain') hooks.drain('primary')
    else if (m.bg === 'ask') {
      const reply = (value: unknown): void => {
        if (process.connected) process.send?.({ bg: 'answer', id: m.id, value })
      }
      hooks.answer(m.what).then(reply, () => reply(null))
    }
  })
  process.on('disconnect', () => hooks.drain('primary gone'))
}
