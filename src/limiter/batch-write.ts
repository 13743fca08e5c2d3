import { Cluster, type Redis } from 'ioredis'
import { checkAnswers, queueIndex, writeIndexOnCluster, type IndexShards } from './pipeline.js'
import { StoreError } from './store-error.js'

/** One script call of a batch: its keys (one slot) and its arguments after them. */
export interface ScriptCall {
  keys: string[]
  argv: (string | number)[]
}

type Command = (numKeys: number, ...args: (string | number)[]) => unknown

/**
 * The one writer under every batched recorder's store (the usage days, the upgrade report, the
 * tuning evidence, the late ledger): a batch's script calls and its index entries, on one
 * Redis as one pipeline (one write, one wait), on a Cluster each call alone with the index
 * sets' MULTIs (a pipeline must keep to one slot), all at once. A failure is a StoreError;
 * `within` bounds the wait (the ledger's store.timeout_ms).
 */
export async function sendBatch(
  client: Redis | Cluster,
  command: string,
  calls: readonly ScriptCall[],
  shards: IndexShards = new Map(),
  within: <T>(p: Promise<T>) => Promise<T> = (p) => p
): Promise<void> {
  if (calls.length === 0 && shards.size === 0) return
  try {
    if (client instanceof Cluster) {
      const scripts = client as unknown as Record<string, Command>
      await within(
        Promise.all([
          ...calls.map((c) => scripts[command]!(c.keys.length, ...c.keys, ...c.argv)),
          ...writeIndexOnCluster(client, shards),
        ])
      )
      return
    }
    const p = client.pipeline() as unknown as Record<string, Command> &
      ReturnType<Redis['pipeline']>
    for (const c of calls) p[command]!(c.keys.length, ...c.keys, ...c.argv)
    const sent = calls.length + queueIndex(p, shards)
    checkAnswers(await within(p.exec()), sent)
  } catch (err) {
    if (err instanceof StoreError) throw err
    throw new StoreError(`redis: ${(err as Error).message}`, { cause: err })
  }
}
