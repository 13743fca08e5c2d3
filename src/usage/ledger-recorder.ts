import { BatchedFront, type RecorderOptions } from '../batch/recorder.js'
import { keys } from '../limiter/keys.js'
import type { CheckTag, Ledger, LedgerBatch, LedgerRef } from '../types.js'

// SPEC §5 "One ledger": calls that belong in a team's month but that no rate-limit script put
// there, written to the ledger late, its month and its day together, once per batch:
// - with monthly quotas off, every admitted call of a team's base (no window counts it);
// - with them on, a call admitted by this process's fallback while the store did not answer
//   (on_error: open): its month catches up when the store answers, with its day.
// Teams are bounded by the file, so the batch is too.

interface Open {
  batch: LedgerBatch
  calls: number
}

export class LedgerRecorder extends BatchedFront<Open> {
  constructor(store: Pick<Ledger, 'addToLedger'>, opts: RecorderOptions) {
    super(
      {
        empty: () => ({ batch: new Map(), calls: 0 }),
        isEmpty: (o) => o.batch.size === 0,
        weight: (o) => o.calls,
        write: (o, id) => store.addToLedger(o.batch, id),
      },
      opts
    )
  }

  /**
   * One call of a team's month, on its day of the month ("05"); `inDoubt`: the tag of a check
   * that may have charged it already (written only if it did not).
   */
  record(ref: LedgerRef, day: string, inDoubt?: CheckTag): void {
    const open = this.recorder.batch
    const key = keys.ledger(ref.team, ref.month)
    let entry = open.batch.get(key)
    if (entry === undefined) open.batch.set(key, (entry = { ref, days: new Map() }))
    if (inDoubt === undefined) entry.days.set(day, (entry.days.get(day) ?? 0) + 1)
    else {
      entry.doubts ??= new Map()
      const tags = entry.doubts.get(day)
      if (tags === undefined) entry.doubts.set(day, [inDoubt])
      else tags.push(inDoubt)
    }
    open.calls++
  }
}
