import { describe, expect, it } from 'vitest'
import {
  KEYS_PER_DAY,
  REPORT_DAYS,
  type ReportBatch,
  type ReportStore,
} from '../../src/history/report-store.js'

// One behaviour for every upgrade-report store (SPEC §8): memory, Redis, Redis Cluster.

const DAY = 86_400_000
const T0 = Date.parse('2026-11-23T12:00:00Z')

export function batch(
  entries: Record<string, Record<string, number>>,
  lastSeenMs = T0
): ReportBatch {
  const out: ReportBatch = new Map()
  for (const [id, keys] of Object.entries(entries)) {
    const m = new Map(Object.entries(keys))
    out.set(id, { calls: [...m.values()].reduce((a, b) => a + b, 0), lastSeenMs, keys: m })
  }
  return out
}

let n = 0
let seq = 0
/** A fresh batch id (each add a batch of its own, as a recorder's are). */
const next = () => ({ instance: 'contract', seq: ++seq })
export function reportContract(name: string, make: () => Promise<ReportStore>): void {
  describe(`${name}: upgrade report counters`, () => {
    it('sums calls and keys across batches (and instances), busiest keys first, last seen the latest', async () => {
      const a = await make()
      const id = `e${n++}`
      await a.add(batch({ [id]: { 'base:aa': 3, 'ip:1.2.3.4': 1 } }, T0 - 5_000), next())
      await a.add(batch({ [id]: { 'base:aa': 2, 'base:bb': 4 } }, T0 - 1_000), next())
      const r = (await a.read([id], T0)).get(id)!
      expect(r.calls).toBe(10)
      expect(r.lastSeenMs).toBe(T0 - 1_000)
      expect(r.topKeys).toEqual([
        { key: 'base:aa', calls: 5 },
        { key: 'base:bb', calls: 4 },
        { key: 'ip:1.2.3.4', calls: 1 },
      ])
    })

    it('counts the last 35 days only', async () => {
      const s = await make()
      const id = `e${n++}`
      await s.add(batch({ [id]: { 'base:old': 7 } }, T0 - REPORT_DAYS * DAY), next())
      await s.add(batch({ [id]: { 'base:new': 2 } }, T0 - (REPORT_DAYS - 1) * DAY), next())
      const r = (await s.read([id], T0)).get(id)!
      expect(r.calls).toBe(2)
      expect(r.topKeys).toEqual([{ key: 'base:new', calls: 2 }])
    })

    it('keeps at most 20 keys in the answer and a bounded number per day, whatever the clients', async () => {
      const s = await make()
      const id = `e${n++}`
      const keys: Record<string, number> = {}
      for (let i = 0; i < KEYS_PER_DAY * 3; i++)
        keys[`ip:10.0.${Math.floor(i / 250)}.${i % 250}`] = 1
      keys['base:busy'] = 50
      await s.add(batch({ [id]: keys }), next())
      const r = (await s.read([id], T0)).get(id)!
      expect(r.calls).toBe(KEYS_PER_DAY * 3 + 50)
      expect(r.topKeys).toHaveLength(20)
      expect(r.topKeys[0]).toEqual({ key: 'base:busy', calls: 50 })
    })

    it('a batch written twice with one id counts once (issue #40 item 8: a write that timed out but landed)', async () => {
      const s = await make()
      const id = `e${n++}`
      const once = next()
      await s.add(batch({ [id]: { 'base:aa': 3 } }), once)
      await s.add(batch({ [id]: { 'base:aa': 3 } }), once)
      await s.add(batch({ [id]: { 'base:aa': 1 } }), next())
      expect((await s.read([id], T0)).get(id)!.calls).toBe(4)
    })

    it('an entry never seen reads as zero', async () => {
      const s = await make()
      expect((await s.read(['never'], T0)).get('never')).toEqual({
        calls: 0,
        lastSeenMs: null,
        topKeys: [],
      })
    })
  })
}
