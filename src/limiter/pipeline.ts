import calculateSlot from 'cluster-key-slot'
import type { Cluster } from 'ioredis'
import { StoreError } from './store-error.js'

// What the store's writers and readers share about Redis: a Cluster's slots, a day's or
// month's index kept as sets in shards, and a pipeline's answers.

/**
 * Indexes of the items, grouped by the Cluster slot of their key (the full key, prefix
 * included), in order of first appearance: a script runs on one slot.
 */
export function slotGroups<T>(items: readonly T[], keyOf: (item: T) => string): number[][] {
  const groups = new Map<number, number[]>()
  for (let i = 0; i < items.length; i++) {
    const slot = calculateSlot(keyOf(items[i]!))
    const g = groups.get(slot)
    if (g) g.push(i)
    else groups.set(slot, [i])
  }
  return [...groups.values()]
}

/** Index sets to add members to, each with when it expires. */
export type IndexShards = Map<string, { members: string[]; expireAtMs: number }>

/** Groups members by their index set (one SADD per set). */
export function indexShards<T>(
  items: readonly T[],
  of: (item: T) => { index: string; member: string; expireAtMs: number }
): IndexShards {
  const shards: IndexShards = new Map()
  for (const item of items) {
    const { index, member, expireAtMs } = of(item)
    const s = shards.get(index)
    if (s === undefined) shards.set(index, { members: [member], expireAtMs })
    else s.members.push(member)
  }
  return shards
}

/** The index sets' writes on a Cluster (each set in its own slot, a MULTI of two). */
export function writeIndexOnCluster(cluster: Cluster, shards: IndexShards): Promise<unknown>[] {
  return [...shards].map(([k, s]) =>
    cluster
      .multi()
      .sadd(k, ...s.members)
      .pexpireat(k, s.expireAtMs)
      .exec()
  )
}

/** Queues the index sets' writes on a pipeline (two commands each). */
export function queueIndex(
  p: { sadd(k: string, ...m: string[]): { pexpireat(k: string, at: number): unknown } },
  shards: IndexShards
): number {
  for (const [k, s] of shards) p.sadd(k, ...s.members).pexpireat(k, s.expireAtMs)
  return 2 * shards.size
}

/**
 * A pipeline's answers: a StoreError for the first that failed, or when fewer came back than
 * were sent (a connection lost part way).
 */
export function checkAnswers(results: [Error | null, unknown][] | null, sent: number): void {
  const all = results ?? []
  const failed = all.find(([err]) => err !== null)
  if (failed) throw new StoreError(`redis: ${failed[0]!.message}`, { cause: failed[0] })
  if (all.length < sent) throw new StoreError('redis: the pipeline was cut short')
}
