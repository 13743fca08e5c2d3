import type { BatchId } from '../types.js'

/**
 * Once per batch, the memory stores' twin of lua/once.lua: a writer's batches come in
 * its own order, so a batch whose number is not past the last one applied for its writer was
 * applied whole (a retry of one that landed). True, and marked, the first time; false after.
 */
export function firstTime(seen: Map<string, number>, id: BatchId): boolean {
  if ((seen.get(id.instance) ?? 0) >= id.seq) return false
  seen.set(id.instance, id.seq)
  return true
}
