import { type Clock, type Timer } from '../clock.js'
import {
  BUCKETS_PER_WINDOW,
  windowMsOf,
  type Charge,
  type Decision,
  type GiveBack,
  type WindowState,
  type Windows,
} from '../types.js'

export interface LeaseOptions {
  /**
   * A lease lasts until its bucket ends on the store's clock, measured on this clock's
   * monotonic time from the moment the grant was asked (so never later than the store's own
   * bucket end); its timer gives it back then. The system clock unless a test drives one.
   */
  clock: Clock
  /** The largest share, as a fraction of the window's limit (default 1/20). */
  maxShare?: number
  /** Keys whose demand is remembered (default 100,000; the oldest goes first). */
  maxKeys?: number
  /** Counted in /metrics: calls admitted from shares, and calls of shares given back unused. */
  observe?: { admitted(): void; returned(units: number): void }
}

/** A share of one window's budget for one bucket, charged in the store, admitted here. */
interface Lease {
  charge: Charge
  /** Calls still to admit from it. */
  units: number
  /** The grant's time on the decision's clock: its bucket, for the give-back. */
  grantAtMs: number
  /** The end of its bucket, on the monotonic clock. */
  deadline: number
  /** The window's count the store reported with the whole share in it. */
  usedAtGrant: number
  resetAtMs: number
  /** For the decision clock of a local admission: when the grant came, on the monotonic clock. */
  monoAtGrant: number
  timer: Timer | null
}

/** Calls this process saw for a key, in the current and the previous bucket. */
interface Demand {
  bucket: number
  calls: number
  prev: number
  /** The bucket in which the store last declined a share (the window past half): none is asked again in it. */
  declined: number
}

/** Whether two times on the decision clock fall in one bucket of the charge's window. */
function sameBucket(c: Charge, aMs: number, bMs: number): boolean {
  const w = windowMsOf(c)
  if (w === 0) return true
  const bucketMs = w / BUCKETS_PER_WINDOW
  return Math.floor(aMs / bucketMs) === Math.floor(bMs / bucketMs)
}

const SHARE_OF_LIMIT = 1 / 20
/** How long give-backs wait for others to go with them; a script call holds at most so many. */
const GIVE_BACK_DELAY_MS = 5
const MAX_GIVE_BACK = 500

interface GiveBackBatch {
  uses: GiveBack[]
  /** Settles once the batch was answered (or failed: the shares stay counted, see GuardedStore). */
  sent: Promise<void>
  send: () => void
  timer: Timer | null
  /** A send at the end of this event-loop turn is already asked for (the request path's give-backs). */
  soon: boolean
}

/**
 * Leases for hot keys (issue #14), as a decorator over the shared store.
 *
 * A key this process sees at least twice in a bucket asks, with its next store call, for a
 * share of the window: the store charges the whole share at once (this call and the ones it
 * expects before the bucket ends) if the window stays at or under half its limit with it. The
 * calls that follow are admitted here, without a store call, until the share is used or its
 * bucket ends; what is left then is given back to the store.
 *
 * SPEC §3 holds: every call admitted from a share was charged in the store, in the bucket it
 * arrives in, before it was admitted, so the store's count is never below what was admitted
 * (an unused share only counts calls that never came, until it is given back: that can only
 * refuse, never admit). Past half the limit every call goes to the store one by one, so the
 * last half of a window is exact, and a client near its limit is never refused for another
 * instance's unused share.
 *
 * A request with a monthly window takes no lease (its quota can be raised by any instance's
 * admin API at any moment, and it needs a store call anyway).
 */
export class LeasingStore implements Windows {
  private readonly leases = new Map<string, Lease>()
  private readonly demand = new Map<string, Demand>()
  /** Grants being asked for, by key: later calls wait for them instead of asking again. */
  private readonly pending = new Map<string, Promise<unknown>>()
  private readonly clock: Clock
  private readonly maxShare: number
  private readonly maxKeys: number
  private closed = false
  /** Give-backs waiting to be sent together, and the last batch sent. */
  private batch: GiveBackBatch | null = null
  private lastSent: Promise<void> = Promise.resolve()

  constructor(
    private readonly inner: Windows,
    private readonly opts: LeaseOptions
  ) {
    this.clock = opts.clock
    this.maxShare = opts.maxShare ?? SHARE_OF_LIMIT
    this.maxKeys = opts.maxKeys ?? 100_000
  }

  /**
   * Whether a request could ever be admitted from shares: every window must be able to hold
   * one (sliding, and a limit large enough that 1/20 of it is two calls or more). A request
   * with a monthly window goes to the store each time; so does one on a small limit, such as
   * a flood on a key of 10/min, at no cost here beyond this check.
   */
  private leasable(charges: readonly Charge[]): boolean {
    for (const c of charges) {
      if (c.kind === 'monthly' || this.capOf(c) < 2) return false
    }
    return charges.length > 0
  }

  /** The largest share of a window: `maxShare` of its limit. */
  private capOf(c: Charge): number {
    return Math.floor(c.limit * this.maxShare)
  }

  /** Leases held now (tests). */
  get held(): number {
    return this.leases.size
  }

  /** Calls of the shares held now, not yet admitted (the metric basegate_lease_calls_held). */
  get heldUnits(): number {
    let units = 0
    for (const l of this.leases.values()) units += l.units
    return units
  }

  /**
   * A call no share can serve (a small limit, a monthly window) is the inner store's; one a
   * share held here serves is answered now, with no promise; the rest ask the store.
   */
  consume(charges: readonly Charge[], nowMs: number): Decision | Promise<Decision> {
    if (this.closed || !this.leasable(charges)) return this.inner.consume(charges, nowMs)
    this.count(charges, nowMs)
    return this.takeLocal(charges, nowMs) ?? this.fromStore(charges, nowMs)
  }

  /** A leasable call no share here could serve: after a grant on its way, or from the store. */
  private async fromStore(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    const pending = this.pendingFor(charges)
    if (pending !== null) {
      await pending
      const after = this.takeLocal(charges, nowMs)
      if (after !== null) return after
    }
    // A share that ended goes back to its own bucket, which this call does not charge: no
    // request waits for a give-back.
    const asks = this.asksFor(charges)
    if (asks === null) return this.refusedOrLocal(charges, await this.inner.consume(charges, nowMs))
    const askedMono = this.clock.monotonic()
    const call = Promise.resolve(this.inner.consume(charges, nowMs, { asks }))
    const settled = call.then(
      () => undefined,
      () => undefined
    )
    for (let i = 0; i < charges.length; i++) {
      if (asks.has(charges[i]!.key)) this.pending.set(charges[i]!.key, settled)
    }
    try {
      const d = await call
      this.grant(charges, asks, d, askedMono)
      return this.refusedOrLocal(charges, d)
    } finally {
      for (let i = 0; i < charges.length; i++) {
        const key = charges[i]!.key
        if (this.pending.get(key) === settled) this.pending.delete(key)
      }
    }
  }

  /**
   * A call the store refused while this process holds a share for each of its windows is
   * admitted from the shares: they were charged, and may be what filled the window. Answers
   * on one connection come in the store's order, so a share granted before the refusal is
   * known here by then, and a burst on one instance leaves no share unused while refusing.
   */
  private refusedOrLocal(charges: readonly Charge[], d: Decision): Decision {
    if (d.allowed || this.leases.size === 0) return d
    return this.takeLocal(charges, d.nowMs) ?? d
  }

  /**
   * A decision from the leases this process holds: every window must hold a live share with a
   * call left, or none is taken. A lease found ended is retired (its give-back is not awaited:
   * it goes to its own bucket, which this call does not charge).
   */
  private takeLocal(charges: readonly Charge[], nowMs: number): Decision | null {
    if (this.leases.size === 0) return null
    const clockNow = this.clock.monotonic()
    for (let i = 0; i < charges.length; i++) {
      const c = charges[i]!
      const lease = this.leases.get(c.key)
      if (lease === undefined) return null
      // Ended, or granted under a limit a reload has since changed.
      if (clockNow >= lease.deadline || lease.charge.limit !== c.limit) {
        void this.retire(lease)
        return null
      }
      if (lease.units < 1) return null
    }
    const windows = new Array(charges.length)
    let decisionNow = nowMs
    for (let i = 0; i < charges.length; i++) {
      const lease = this.leases.get(charges[i]!.key)!
      lease.units--
      const used = lease.usedAtGrant - lease.units
      const limit = lease.charge.limit
      windows[i] = {
        limit,
        used,
        remaining: Math.max(0, limit - used),
        resetAtMs: lease.resetAtMs,
        retryAtMs: 0,
      }
      // The decision's clock is the store's: the grant's time, moved on by what passed here.
      if (i === 0) decisionNow = lease.grantAtMs + (clockNow - lease.monoAtGrant)
      // Used up: nothing to give back, so it goes now.
      if (lease.units === 0) void this.retire(lease)
    }
    this.opts.observe?.admitted()
    return { allowed: true, windows, nowMs: decisionNow, leased: true }
  }

  private pendingFor(charges: readonly Charge[]): Promise<unknown> | null {
    if (this.pending.size === 0) return null
    for (const c of charges) {
      const p = this.pending.get(c.key)
      if (p !== undefined) return p
    }
    return null
  }

  /** Counts a call against each window's key, in buckets of that window. */
  private count(charges: readonly Charge[], nowMs: number): void {
    for (const c of charges) {
      const bucket = Math.floor(nowMs / (windowMsOf(c) / BUCKETS_PER_WINDOW))
      const d = this.demand.get(c.key)
      if (d === undefined) {
        if (this.demand.size >= this.maxKeys) {
          const oldest = this.demand.keys().next().value
          if (oldest !== undefined) this.demand.delete(oldest)
        }
        this.demand.set(c.key, { bucket, calls: 1, prev: 0, declined: -1 })
      } else if (d.bucket === bucket) {
        d.calls++
      } else {
        d.prev = d.bucket === bucket - 1 ? d.calls : 0
        d.bucket = bucket
        d.calls = 1
      }
    }
  }

  /**
   * The share to ask for, per window: as many calls as this process saw for the key in the
   * last bucket (or this one, if more), at most `maxShare` of the limit; 0 for a key seen once,
   * one that still holds a share, or one declined in this bucket. Null when nothing is asked.
   */
  private asksFor(charges: readonly Charge[]): Map<string, number> | null {
    let asks: Map<string, number> | null = null
    for (let i = 0; i < charges.length; i++) {
      const c = charges[i]!
      const d = this.demand.get(c.key)
      const seen = d === undefined ? 0 : Math.max(d.calls, d.prev)
      const holding = (this.leases.get(c.key)?.units ?? 0) > 0
      const declined = d !== undefined && d.declined === d.bucket
      const ask = seen < 2 || holding || declined ? 0 : Math.min(seen, this.capOf(c))
      if (ask > 0) (asks ??= new Map()).set(c.key, ask)
    }
    return asks
  }

  /**
   * Keeps the shares a decision granted (charged beyond this call). A share asked for and not
   * granted is not asked for again in this bucket, so calls on a key past half its limit do
   * not queue behind each other's asks.
   */
  private grant(
    charges: readonly Charge[],
    asks: ReadonlyMap<string, number>,
    d: Decision,
    askedMono: number
  ): void {
    if (this.closed) return
    for (let i = 0; i < charges.length; i++) {
      const c = charges[i]!
      const charged = d.allowed ? d.windows[i]!.charged : undefined
      const units = charged !== undefined ? charged - 1 : 0
      if (units < 1) {
        const demand = asks.has(c.key) ? this.demand.get(c.key) : undefined
        if (demand !== undefined) demand.declined = demand.bucket
        continue
      }
      const bucketMs = windowMsOf(c) / BUCKETS_PER_WINDOW
      const endMs = (Math.floor(d.nowMs / bucketMs) + 1) * bucketMs
      const w = d.windows[i]!
      let lease = this.leases.get(c.key)
      // Two grants in one bucket (asks that crossed) make one share: giving the older back
      // now could leave refused calls behind it that its calls would have admitted.
      if (lease !== undefined && lease.grantAtMs >= endMs - bucketMs) {
        lease.units += units
        lease.usedAtGrant = Math.max(lease.usedAtGrant, w.used)
      } else {
        if (lease !== undefined) void this.retire(lease)
        lease = this.lease(c, units, w, d.nowMs, endMs, askedMono)
      }
      // The first local call reports the count without the calls still to come.
      w.used -= lease.units
      w.remaining = Math.max(0, w.limit - w.used)
    }
  }

  /** A new share, held until its bucket ends (on the store's clock, a timer gives it back). */
  private lease(
    c: Charge,
    units: number,
    w: WindowState,
    grantAtMs: number,
    endMs: number,
    askedMono: number
  ): Lease {
    const lease: Lease = {
      charge: c,
      units,
      grantAtMs,
      // The script ran after askedMono, so its bucket ends no sooner than this.
      deadline: askedMono + (endMs - grantAtMs),
      usedAtGrant: w.used,
      resetAtMs: w.resetAtMs,
      monoAtGrant: this.clock.monotonic(),
      timer: null,
    }
    lease.timer = this.clock.setTimer(
      () => void this.retire(lease),
      lease.deadline - lease.monoAtGrant
    )
    this.leases.set(c.key, lease)
    return lease
  }

  /**
   * Ends a lease: no call is admitted from it again, and its unused share goes back with the
   * next batch. The promise settles when that batch has been sent and answered.
   */
  private retire(lease: Lease): Promise<void> {
    if (this.leases.get(lease.charge.key) === lease) this.leases.delete(lease.charge.key)
    lease.timer?.cancel()
    lease.timer = null
    const units = lease.units
    lease.units = 0
    if (units === 0) return Promise.resolve()
    this.opts.observe?.returned(units)
    const batch = (this.batch ??= this.newBatch())
    batch.uses.push({ charge: lease.charge, units, atMs: lease.grantAtMs })
    if (batch.uses.length >= MAX_GIVE_BACK) this.flush()
    return batch.sent
  }

  /**
   * Shares of one bucket end together (every key's bucket ends at the same moment), so their
   * give-backs wait a few ms and go as one script call: one round trip for all, not one a key.
   */
  private newBatch(): GiveBackBatch {
    let send!: () => void
    const sent = new Promise<void>((resolve) => (send = resolve))
    const batch: GiveBackBatch = { uses: [], sent, send, timer: null, soon: false }
    batch.timer = this.clock.setTimer(() => this.flush(), GIVE_BACK_DELAY_MS)
    return batch
  }

  private flush(): void {
    const batch = this.batch
    if (batch === null) return
    this.batch = null
    batch.timer?.cancel()
    this.lastSent = this.inner.giveBack!(batch.uses)
      .catch(() => {})
      .then(batch.send)
  }

  /**
   * Calls given back by the request path (SPEC §9: shed, or failed at the server). A call of a
   * share still held in the same bucket goes back into the share (another call may use it; the
   * share's rest goes back when it ends); any other joins the give-back batch, sent at the end
   * of this turn of the event loop: a burst of sheds costs one script call.
   */
  giveBack(uses: readonly GiveBack[]): Promise<void> {
    if (uses.length === 0) return Promise.resolve()
    const clockNow = this.clock.monotonic()
    let batch: GiveBackBatch | null = null
    for (const u of uses) {
      const lease = this.leases.get(u.charge.key)
      if (
        lease !== undefined &&
        clockNow < lease.deadline &&
        lease.charge.limit === u.charge.limit &&
        sameBucket(lease.charge, lease.grantAtMs, u.atMs)
      ) {
        lease.units += u.units
        continue
      }
      batch = this.batch ??= this.newBatch()
      batch.uses.push(u)
    }
    if (batch === null) return Promise.resolve()
    // The request path waits for these (a shed's 503 goes after its give-back): they go at the
    // end of this turn of the event loop, with every other give-back of the same turn.
    if (batch.uses.length >= MAX_GIVE_BACK) this.flush()
    else if (!batch.soon) {
      batch.soon = true
      setImmediate(() => this.batch === batch && this.flush())
    }
    return batch.sent
  }

  /** Settles once every give-back sent or waiting now has been answered. */
  async settled(): Promise<void> {
    const batch = this.batch
    if (batch !== null) await batch.sent
    await this.lastSent
  }

  peek(charges: readonly Charge[], nowMs: number): Promise<Decision> {
    return this.inner.peek(charges, nowMs)
  }

  ready(): Promise<boolean> {
    return this.inner.ready()
  }

  /** Gives every unused share back, then closes the store. */
  async close(): Promise<void> {
    this.closed = true
    const retiring = [...this.leases.values()].map((l) => this.retire(l))
    this.flush()
    await Promise.all(retiring)
    await this.inner.close()
  }
}
