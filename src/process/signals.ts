import type { Core } from './core.js'

// SPEC §1: SIGTERM and SIGINT drain and stop; SIGHUP reloads.

/** SIGTERM/SIGINT run `stop` once, then exit 0; returns the same stop for other triggers. */
export function stopOnSignals(core: Core, stop: () => Promise<void>): (source: string) => void {
  const run = (source: string): void => {
    if (core.draining) return
    core.draining = true
    core.logger.info({ signal: source }, 'stopping: draining in-flight requests')
    void stop().then(() => {
      core.logger.info('stopped')
      // What the log holds is written first (a reader behind by a little), within a bound.
      const exit = () => core.runtime.clock.setTimer(() => process.exit(0), 20)
      const bound = core.runtime.clock.setTimer(() => process.exit(0), 2000)
      core.logger.flush(() => {
        bound.cancel()
        exit()
      })
    })
  }
  process.on('SIGTERM', () => run('SIGTERM'))
  process.on('SIGINT', () => run('SIGINT'))
  process.on('uncaughtException', (err) => {
    // A socket error escaping its handler must not take every other request down with it.
    core.logger.error({ err }, 'uncaught exception')
  })
  return run
}

/** SIGHUP reloads the file (a process that reads it: serving alone, or a primary). */
export function reloadOnHangup(core: Core): void {
  process.on('SIGHUP', () => void core.reload('SIGHUP'))
}

/**
 * A worker ignores SIGHUP (a closing terminal sends it to the whole group, and it would kill the
 * process): its primary reloads and hands it the result.
 */
export function ignoreHangup(): void {
  process.on('SIGHUP', () => {})
}
