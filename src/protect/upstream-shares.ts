import type { EventEmitter } from 'node:events'
import type { Clock, Timer } from '../clock.js'

// SPEC §4 "The upstream pool": one client IP holds at most its share of this process's
// connections to the server at once; its calls past that wait for one of its own, never for
// another client's. A call whose body still comes from its client as it is forwarded (a long or
// unannounced upload) holds its connection for as long as the client dawdles (down to
// min_body_rate); every other call holds one only for the server's time. So the last quarter of
// the pool (at least one client's share) is kept for calls that stream no body: however many
// addresses drip what uploads they may, the others' calls find a connection. nginx's limit_conn
// and Envoy's per-downstream connection limits bound the same thing.

/** How a wait for an upstream connection ended. */
export type ShareWait = 'granted' | 'busy' | 'cancelled'

export interface ShareLimits {
  /** Connections this process keeps to the server (upstream.max_connections). */
  total: number
  /** Connections one client holds at once (upstream.max_connections_per_client). */
  perClient: number
  /** How long a call may wait for one (protect.queue_ms); 0: not at all. */
  waitMs: number
}

interface Waiter {
  client: string
  streamed: boolean
  settle: (r: ShareWait) => void
  timer: Timer | null
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

/** Connections only calls that stream no body may take: a quarter, at least one client's share. */
export function keptOf(l: ShareLimits): number {
  return Math.min(l.total - 1, Math.max(l.perClient, Math.floor(l.total / 4)))
}

export class UpstreamShares {
  private readonly held = new Map<string, number>()
  private inUse = 0
  /** Waiting calls, oldest first; a settled one stays until a scan passes it. */
  private waiters: Waiter[] = []
  private waiting = 0
  private busy = 0

  constructor(
    private readonly limits: () => ShareLimits,
    private readonly clock: Clock
  ) {}

  private may(client: string, streamed: boolean, l: ShareLimits): boolean {
    const own = this.held.get(client) ?? 0
    if (own >= l.perClient) return false
    return this.inUse < (streamed ? l.total - keptOf(l) : l.total)
  }

  private grant(client: string): void {
    this.held.set(client, (this.held.get(client) ?? 0) + 1)
    this.inUse++
  }

  /**
   * A connection for a call of `client` (`streamed`: its body still comes from the client):
   * 'granted' at once when one is free to it, else a wait (until one of its own frees, or the
   * pool has room) of at most `waitMs`, cancelled when `gone` closes. A granted share is given
   * back with give().
   */
  take(client: string, streamed: boolean, gone: EventEmitter): 'granted' | Promise<ShareWait> {
    const l = this.limits()
    if (this.may(client, streamed, l)) {
      this.grant(client)
      return 'granted'
    }
    if (l.waitMs <= 0) {
      this.busy++
      return Promise.resolve('busy')
    }
    return new Promise<ShareWait>((resolve) => {
      const w: Waiter = { client, streamed, settle: () => {}, timer: null, done: false }
      const onClose = () => w.settle('cancelled')
      w.settle = (r) => {
        if (w.done) return
        w.done = true
        this.waiting--
        w.timer?.cancel()
        gone.off('close', onClose)
        if (r === 'busy') this.busy++
        resolve(r)
      }
      w.timer = this.clock.setTimer(() => w.settle('busy'), l.waitMs)
      gone.once('close', onClose)
      // Settled waiters leave at the next give(); while none comes, they leave here.
      if (this.waiters.length > 2 * this.waiting + 64)
        this.waiters = this.waiters.filter((x) => !x.done)
      this.waiters.push(w)
      this.waiting++
    })
  }

  /** A call of `client` is done with its connection: the oldest waiter it frees one for gets it. */
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
      this.waiters = []
      return
    }
    const l = this.limits()
    let live = 0
    for (let i = 0; i < this.waiters.length; i++) {
      const w = this.waiters[i]!
      if (w.done) continue
      if (this.may(w.client, w.streamed, l)) {
        this.grant(w.client)
        w.settle('granted')
        continue
      }
      this.waiters[live++] = w
    }
    this.waiters.length = live
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
