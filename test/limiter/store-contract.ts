import { describe, expect, it } from 'vitest'
import type {
  Charge,
  LedgerMonth,
  LimiterStore,
  MonthlyCharge,
  SlidingCharge,
  Windows,
} from '../../src/types.js'
import { keys } from '../../src/limiter/keys.js'

// One behaviour for every store (SPEC §3). Each store's test file runs this suite against a
// real instance: the memory store in process, the Redis store against a real redis-server.

export interface StoreFactory<S = LimiterStore> {
  /** A fresh store whose keys no other test sees. */
  make(): Promise<S>
}

const MIN = 60_000

let n = 0
export function charge(limit: number, windowMs = MIN, key = `k${n++}`): SlidingCharge {
  return { key, limit, windowMs, kind: 'class', cls: 'base' }
}

/** A seeded pseudo-random sequence in [0, 1), the same on every run. */
export function seededRandom(seed: number): () => number {
  return () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
}

/** Every window of `windowMs` ending at an admitted call holds at most `limit` of them. */
export function expectBoundHeld(
  admitted: readonly number[],
  windowMs: number,
  limit: number
): void {
  for (const end of admitted) {
    const inWindow = admitted.filter((x) => x > end - windowMs && x <= end).length
    expect(inWindow).toBeLessThanOrEqual(limit)
  }
}

/** A start time in the middle of a bucket, like any real moment. */
const T0 = Math.floor(Date.now() / 1200) * 1200 + 500

export function storeContract(name: string, factory: StoreFactory<Windows>): void {
  describe(`${name}: the sliding-window contract`, () => {
    it('admits up to the limit, then refuses, and counts remaining down', async () => {
      const store = await factory.make()
      const c = charge(3)
      const seen: number[] = []
      for (let i = 0; i < 4; i++) {
        const d = await store.consume([c], T0 + i)
        seen.push(d.allowed ? d.windows[0]!.remaining : -1)
      }
      expect(seen).toEqual([2, 1, 0, -1])
    })

    it('does not count a refused call', async () => {
      const store = await factory.make()
      const c = charge(2)
      await store.consume([c], T0)
      await store.consume([c], T0)
      for (let i = 0; i < 5; i++) expect((await store.consume([c], T0 + 10)).allowed).toBe(false)
      const d = await store.consume([c], T0 + 20)
      expect(d.windows[0]!.used).toBe(2)
      // Once the two admitted calls leave, the whole limit is free again.
      const later = T0 + MIN + MIN / 50
      expect((await store.consume([c], later)).allowed).toBe(true)
      expect((await store.consume([c], later)).allowed).toBe(true)
      expect((await store.consume([c], later)).allowed).toBe(false)
    })

    it('keeps a call counted for its whole window, and at most 1/50 of it longer', async () => {
      const store = await factory.make()
      // Start at several offsets inside a bucket: the bound holds for any of them.
      for (const offset of [0, 1, 599, 1199]) {
        const c = charge(1)
        const t = Math.floor(T0 / 1200) * 1200 + offset
        expect((await store.consume([c], t)).allowed).toBe(true)
        // Never early: still counted one ms before the window ends.
        expect((await store.consume([c], t + MIN - 1)).allowed).toBe(false)
        // At most 1/50 late.
        expect((await store.consume([c], t + MIN + MIN / 50)).allowed).toBe(true)
      }
    })

    it('never admits more than the limit in any window, across random arrivals', async () => {
      const store = await factory.make()
      const limit = 20
      const c = charge(limit, 10_000)
      const admitted: number[] = []
      let t = T0
      const rand = seededRandom(42)
      for (let i = 0; i < 600; i++) {
        t += Math.floor(rand() * 200)
        if ((await store.consume([c], t)).allowed) admitted.push(t)
      }
      expectBoundHeld(admitted, 10_000, limit)
      expect(admitted.length).toBeGreaterThan(limit)
    })

    it('never refuses a client sending steadily at 90 % of the limit', async () => {
      const store = await factory.make()
      const limit = 100
      const c = charge(limit)
      const interval = MIN / (limit * 0.9)
      let refused = 0
      for (let i = 0; i < 400; i++) {
        if (!(await store.consume([c], T0 + Math.round(i * interval))).allowed) refused++
      }
      expect(refused).toBe(0)
    })

    it('charges every window or none', async () => {
      const store = await factory.make()
      const roomy = charge(10)
      const full = charge(1)
      await store.consume([full], T0)
      const d = await store.consume([roomy, full], T0 + 1)
      expect(d.allowed).toBe(false)
      expect(d.windows[0]!.retryAtMs).toBe(0)
      expect(d.windows[1]!.retryAtMs).toBeGreaterThan(0)
      // The roomy window was not charged by the refused call.
      const after = await store.consume([roomy], T0 + 2)
      expect(after.windows[0]!.used).toBe(1)
    })

    it('reports resetAt as when the oldest counted call leaves, and retryAt as when a call fits', async () => {
      const store = await factory.make()
      const c = charge(2)
      const t1 = T0
      const t2 = T0 + 10 * 1200
      await store.consume([c], t1)
      const second = await store.consume([c], t2)
      const bucket = MIN / 50
      const leave1 = (Math.floor(t1 / bucket) + 1) * bucket + MIN
      expect(second.windows[0]!.resetAtMs).toBe(leave1)
      const refused = await store.consume([c], t2 + 1)
      expect(refused.allowed).toBe(false)
      expect(refused.windows[0]!.retryAtMs).toBe(leave1)
      expect((await store.consume([c], leave1 - 1)).allowed).toBe(false)
      expect((await store.consume([c], leave1)).allowed).toBe(true)
    })

    it('counts keys separately', async () => {
      const store = await factory.make()
      const a = charge(1)
      const b = charge(1)
      expect((await store.consume([a], T0)).allowed).toBe(true)
      expect((await store.consume([b], T0)).allowed).toBe(true)
      expect((await store.consume([a], T0)).allowed).toBe(false)
    })

    it('admits exactly the limit from a concurrent burst', async () => {
      const store = await factory.make()
      const c = charge(50)
      const results = await Promise.all(Array.from({ length: 200 }, () => store.consume([c], T0)))
      expect(results.filter((r) => r.allowed).length).toBe(50)
    })

    it('works for second, hour and day windows too', async () => {
      const store = await factory.make()
      for (const w of [1_000, 3_600_000, 86_400_000]) {
        const c = charge(2, w)
        expect((await store.consume([c], T0)).allowed).toBe(true)
        expect((await store.consume([c], T0)).allowed).toBe(true)
        expect((await store.consume([c], T0 + w - 1)).allowed).toBe(false)
        expect((await store.consume([c], T0 + w + w / 50)).allowed).toBe(true)
      }
    })

    it('takes a call given back from the bucket it was charged in, and never below zero (SPEC §9)', async () => {
      const store = await factory.make()
      const c = charge(3)
      const times: number[] = []
      for (let i = 0; i < 3; i++) {
        const d = await store.consume([c], T0 + i)
        expect(d.allowed).toBe(true)
        times.push(d.nowMs)
      }
      expect((await store.consume([c], T0 + 3)).allowed).toBe(false)
      await store.giveBack!([
        { charge: c, units: 1, atMs: times[0]! },
        { charge: c, units: 1, atMs: times[1]! },
      ])
      expect((await store.consume([c], T0 + 4)).allowed).toBe(true)
      expect((await store.consume([c], T0 + 5)).allowed).toBe(true)
      expect((await store.consume([c], T0 + 6)).allowed).toBe(false)
      // More than its bucket holds: nothing is taken, so the window cannot go below zero.
      const d = charge(3)
      const first = await store.consume([d], T0)
      await store.giveBack!([{ charge: d, units: 2, atMs: first.nowMs }])
      expect((await store.consume([d], T0 + 1)).allowed).toBe(true)
      expect((await store.consume([d], T0 + 2)).allowed).toBe(true)
      expect((await store.consume([d], T0 + 3)).allowed).toBe(false)
    })

    it('gives nothing back into a bucket that has left the window', async () => {
      const store = await factory.make()
      const c = charge(1)
      const old = await store.consume([c], T0)
      const later = T0 + MIN + 2 * (MIN / 50)
      expect((await store.consume([c], later)).allowed).toBe(true)
      await store.giveBack!([{ charge: c, units: 1, atMs: old.nowMs }])
      expect((await store.consume([c], later + 1)).allowed).toBe(false)
    })

    it('admits a request with no windows without a store call', async () => {
      const store = await factory.make()
      const d = await store.consume([], T0)
      expect(d).toMatchObject({ allowed: true, windows: [] })
    })
  })
}

/** Calendar windows (the monthly quota) and peek, for every store. */
export function calendarContract(name: string, factory: StoreFactory<Windows>): void {
  describe(`${name}: calendar windows and peek`, () => {
    // A month's counter and its override key share a hash tag, as limiter/keys.ts makes them.
    const month = (limit: number, endMs: number, tag = `m${n++}`): Charge => ({
      key: `{${tag}}:month`,
      limit,
      endMs,
      kind: 'monthly',
      cls: 'base',
      team: 't',
      quotaKey: `{${tag}}:team`,
      day: '15',
      month: '2026-11',
    })

    it('admits up to the quota in the period, then refuses until its end', async () => {
      const store = await factory.make()
      const end = T0 + 10 * 86_400_000
      const m = month(3, end)
      const seen = []
      for (let i = 0; i < 4; i++) seen.push((await store.consume([m], T0 + i * 1000)).allowed)
      expect(seen).toEqual([true, true, true, false])
      const refused = await store.consume([m], T0 + 5_000_000)
      expect(refused.windows[0]).toMatchObject({
        used: 3,
        remaining: 0,
        retryAtMs: end,
        resetAtMs: end,
      })
    })

    it('is charged with the rate windows all or nothing', async () => {
      const store = await factory.make()
      const m = month(1, T0 + 86_400_000)
      const rate = charge(10)
      expect((await store.consume([rate, m], T0)).allowed).toBe(true)
      const d = await store.consume([rate, m], T0 + 1)
      expect(d.allowed).toBe(false)
      expect(d.windows[0]!.used).toBe(1) // the rate window was not charged by the refusal
    })

    it('peek changes nothing', async () => {
      const store = await factory.make()
      const rate = charge(2)
      const m = month(5, T0 + 86_400_000)
      await store.consume([rate, m], T0)
      for (let i = 0; i < 5; i++) {
        const p = await store.peek([rate, m], T0 + 1)
        expect(p.windows.map((w) => w.used)).toEqual([1, 1])
      }
      expect((await store.consume([rate, m], T0 + 2)).windows.map((w) => w.used)).toEqual([2, 2])
      const full = await store.peek([rate, m], T0 + 3)
      expect(full.allowed).toBe(false)
      expect(full.windows[0]!.remaining).toBe(0)
    })
  })
}

/**
 * SPEC §5 "One ledger", for every store: a team's month and its days are written together
 * (a charge, a give-back, a late batch, a credit), so used = Σ days − Σ credits always; late
 * batches count once per id; a notice has one claimant, who may ask again.
 */
export function ledgerContract(name: string, factory: StoreFactory): void {
  describe(`${name}: the team ledger`, () => {
    const END = Date.parse('2026-12-01T00:00:00Z')
    const place = () => {
      const team = `team${n++}`
      const ref = { team, month: '2026-11', endMs: END }
      const charge = (day: string, limit = 100): MonthlyCharge => ({
        kind: 'monthly',
        key: keys.ledger(team, '2026-11'),
        limit,
        cls: 'base',
        endMs: END,
        day,
        month: '2026-11',
        quotaKey: keys.teamChange(team),
        team,
      })
      return { team, ref, charge }
    }
    const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0)
    const reconciles = (l: LedgerMonth) => expect(l.used).toBe(sum(l.days) - sum(l.credited))

    it('a charge counts in the month and its day, with the quota in force; a give-back takes both back', async () => {
      const store = await factory.make()
      const { ref, charge } = place()
      for (const day of ['03', '03', '04']) await store.consume([charge(day)], T0)
      const d = await store.consume([charge('04', 7)], T0)
      let l = await store.readLedger(ref)
      expect(l.used).toBe(4)
      expect([...l.days].sort()).toEqual([
        ['03', 2],
        ['04', 2],
      ])
      expect(l.quota).toBe(7)
      await store.giveBack([{ charge: charge('04', 7), units: 1, atMs: d.nowMs }])
      l = await store.readLedger(ref)
      expect(l.used).toBe(3)
      expect(l.days.get('04')).toBe(1)
      reconciles(l)
    })

    it('a credit is an entry: used never below 0, the day it was given counted, notices re-armed', async () => {
      const store = await factory.make()
      const { ref, charge } = place()
      for (let i = 0; i < 10; i++) await store.consume([charge('05', 10)], T0)
      expect(await store.claimNotice(ref, 80, 'a')).toBe(true)
      expect(await store.claimNotice(ref, 100, 'a')).toBe(true)
      const e = await store.credit(ref, {
        calls: 4,
        note: 'outage',
        atMs: 1000,
        day: '06',
        quota: 10,
      })
      expect(e).toEqual({ atMs: 1000, calls: 4, asked: 4, note: 'outage', before: 10, after: 6 })
      // 6 of 10: under 80 %, so both notices may be said again this month (by anyone).
      expect(await store.claimNotice(ref, 80, 'b')).toBe(true)
      expect(await store.claimNotice(ref, 100, 'b')).toBe(true)
      const all = await store.credit(ref, {
        calls: 50,
        note: null,
        atMs: 2000,
        day: '06',
        quota: 10,
      })
      expect(all).toMatchObject({ calls: 6, asked: 50, before: 6, after: 0, note: null })
      const l = await store.readLedger(ref)
      expect(l.used).toBe(0)
      expect(l.credited.get('06')).toBe(10)
      expect(l.credits.map((c) => c.calls)).toEqual([4, 6])
      reconciles(l)
    })

    it('late calls are added once per batch id: a batch written again changes nothing', async () => {
      const store = await factory.make()
      const { ref } = place()
      const key = keys.ledger(ref.team, ref.month)
      const batch = () =>
        new Map([
          [
            key,
            {
              ref,
              days: new Map([
                ['07', 5],
                ['08', 2],
              ]),
            },
          ],
        ])
      await store.addToLedger(batch(), { instance: 'p1', seq: 1 })
      await store.addToLedger(batch(), { instance: 'p1', seq: 1 })
      await store.addToLedger(batch(), { instance: 'p2', seq: 1 })
      await store.addToLedger(batch(), { instance: 'p1', seq: 2 })
      const l = await store.readLedger(ref)
      expect(l.used).toBe(21)
      expect(l.days.get('07')).toBe(15)
      reconciles(l)
    })

    it('a notice has one claimant, who wins again when it asks again (a late answer is not a loss)', async () => {
      const store = await factory.make()
      const { ref } = place()
      expect(await store.claimNotice(ref, 80, 'a')).toBe(true)
      expect(await store.claimNotice(ref, 80, 'a')).toBe(true)
      expect(await store.claimNotice(ref, 80, 'b')).toBe(false)
      expect(await store.claimNotice(ref, 100, 'b')).toBe(true)
    })

    it('a month never charged reads as empty', async () => {
      const store = await factory.make()
      expect(await store.readLedger(place().ref)).toEqual({
        used: 0,
        days: new Map(),
        credited: new Map(),
        quota: null,
        credits: [],
      })
    })
  })
}
