import type { EventEmitter } from 'node:events'
import type { Clock, Timer } from '../clock.js'

// SPEC §4 "The upstream pool": one client IP holds at most its share of this process's
// connections to the server at once; its calls past that wait for one of its own, never for
// another client's. The last share of the pool (max_connections_per_client) is kept for clients
// that hold none of it, so however many addresses hold their shares, a client that holds
// nothing is served. A head with no body byte holds none (the body is read ahead first,
// size/body.ts), and an answer read whole frees its connection while a slow client still
// takes it (http/answer-spool.ts). nginx's limit_conn and Envoy's per-downstream connection
// limits bound the same thing.
//
// SPEC §9 within one client: among its calls waiting for a share, a free share goes to the
// first class in protect.priority (the oldest of it), as a slot does, so a person's web-UI
// call never waits behind the API calls of the address it shares (an office behind one NAT).

/** How a wait for an upstream connection ended: `own` its client's share, `pool` the pool full. */
export type ShareWait = 'granted' | 'own' | 'pool' | 'cancelled'

export interface ShareLimits {
  /** Connections this process keeps to the server (upstream.max_connections). */
  total: number
  /** Connections one client holds at once (upstream.max_connections_per_client). */
  perClient: number
  /** How long a call may wait for one (protect.queue_ms); 0: not at all. */
  waitMs: number
  /** Which waiting class a free connection goes to first (protect.priority). */
  priority: readonly string[]
}

interface Waiter {
  client: string
  /** Its class's place in protect.priority (lower first). */
  rank: number
  settle: (r: ShareWait) => void
  done: boolean
}

/** What /v1/protect and the status page show of the pool's shares. */
export interface ShareState {
  in_use: number
  waiting: number
  /** Clients holding as many as they may now. */
  clients_at_share: number
  busy: number
}

/** The part of the pool only a client that holds none may take (one client's share, less one). */
export function keptOf(l: Pick<ShareLimits, 'total' | 'perClient'>): number {
  return Math.max(0, Math.min(l.perClient, l.total - 1))
}

export class UpstreamShares {
  private readonly held = new Map<string, number>()
  private inUse = 0
  /** Waiting calls by rank, each queue oldest first; a settled one stays until a scan passes it. */
  private queues: Waiter[][] = []
  private waiting = 0
  private busy = 0

  constructor(
    private readonly limits: () => ShareLimits,
    private readonly clock: Clock
  ) {}

  /** Why `client` cannot take a connection now (null: it can). */
  private blocked(client: string, l: ShareLimits): 'own' | 'pool' | null {
    const own = this.held.get(client) ?? 0
    if (own >= l.perClient) return 'own'
    // A client that holds none may take the kept part too.
    const open = own === 0 ? l.total : l.total - keptOf(l)
    return this.inUse < open ? null : 'pool'
  }

  private grant(client: string): void {
    this.held.set(client, (this.held.get(client) ?? 0) + 1)
    this.inUse++
  }

  /**
   * A connection for a call of `client` and class `cls`: 'granted' at once when one is free to
   * it, else a wait (until one of its own frees, or the pool has room) of at most `waitMs`,
   * cancelled when `gone` closes. A granted share is given back with give().
   */
  take(client: string, cls: string, gone: EventEmitter): 'granted' | Promise<ShareWait> {
    const l = this.limits()
    const why = this.blocked(client, l)
    if (why === null) {
      this.grant(client)
      return 'granted'
    }
    if (l.waitMs <= 0) {
      this.busy++
      return Promise.resolve(why)
    }
    const rank = rankOf(l.priority, cls)
    return new Promise<ShareWait>((resolve) => {
      let timer: Timer | null = null
      const w: Waiter = { client, rank, settle: () => {}, done: false }
      const onClose = () => w.settle('cancelled')
      w.settle = (r) => {
        if (w.done) return
        w.done = true
        this.waiting--
        timer?.cancel()
        gone.off('close', onClose)
        if (r === 'own' || r === 'pool') this.busy++
        resolve(r)
      }
      // Given up: why, as it stands now (its own share, or the pool).
      timer = this.clock.setTimer(
        () => w.settle(this.blocked(client, this.limits()) ?? 'pool'),
        l.waitMs
      )
      gone.once('close', onClose)
      const q = (this.queues[rank] ??= [])
      // Settled waiters leave at the next give(); while none comes, they leave here.
      if (q.length > 2 * this.waiting + 64) this.queues[rank] = q.filter((x) => !x.done)
      this.queues[rank]!.push(w)
      this.waiting++
    })
  }

  /** A call of `client` is done with its connection: waiters it frees one for get it, the first class first. */
  give(client: string): void {
    const own = this.held.get(client)
    if (own === undefined) return
    if (own <= 1) this.held.delete(client)
    else this.held.set(client, own - 1)
    this.inUse--
    this.serveWaiting()
  }

  private serveWaiting(): void {
    if (this.waiting === 0) {
      this.queues = []
      return
    }
    const l = this.limits()
    for (let r = 0; r < this.queues.length; r++) {
      const q = this.queues[r]
      if (q === undefined) continue
      let live = 0
      for (let i = 0; i < q.length; i++) {
        const w = q[i]!
        if (w.done) continue
        if (this.blocked(w.client, l) === null) {
          this.grant(w.client)
          w.settle('granted')
          continue
        }
        q[live++] = w
      }
      q.length = live
    }
  }

  state(): ShareState {
    const perClient = this.limits().perClient
    let atShare = 0
    for (const n of this.held.values()) if (n >= perClient) atShare++
    return {
      in_use: this.inUse,
      waiting: this.waiting,
      clients_at_share: atShare,
      busy: this.busy,
    }
  }
}

/** A class's place in protect.priority (a class not listed waits last). */
function rankOf(priority: readonly string[], cls: string): number {
  const i = priority.indexOf(cls)
  return i === -1 ? priority.length : i
}
