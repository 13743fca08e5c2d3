import { availableParallelism } from 'node:os'

/** `workers: auto` is one proxy process per core this process may use (as nginx's `auto`). */
export function resolveWorkers(workers: number | 'auto', cores = availableParallelism()): number {
  return workers === 'auto' ? Math.max(1, cores) : workers
}
