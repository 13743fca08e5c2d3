import { every, type Clock, type Timer } from '../clock.js'
import type { LedgerRef, Logger } from '../types.js'

// SPEC §5 notices: when a team's use in a month first reaches 80 % and then 100 % of its quota,
// one warn line, once per team, threshold and month across every instance sharing the store
// (the store decides who says it). Never lost: a claim the store answered late is this
// process's still (it asks again with the same token), one it did not answer is asked again
// every few seconds until it is decided, and the 100 % line waits until the 80 % one is
// decided. A credit that takes `used` back under a threshold re-arms it (the store forgets the
// claim; this process forgets it when it sees the count under the threshold).

const MESSAGE: Record<80 | 100, string> = {
  80: 'monthly quota 80% used',
  100: 'monthly quota used up',
}

/** How often claims the store did not decide are asked again. */
export const NOTICE_RETRY_MS = 5_000

type State = 'open' | 'asking' | 'decided'

/** One team's month as this process knows its notices. */
interface Month {
  ref: LedgerRef
  states: Record<80 | 100, State>
  /** The count and quota the last call saw (a retry says them). */
  used: number
  quota: number
}

export interface NoticeStore {
  claimNotice(ref: LedgerRef, threshold: 80 | 100, token: string): Promise<boolean>
}

export class MonthlyNotices {
  /** `team\nmonth` → its notices (teams × the months seen: bounded by the file). */
  private readonly months = new Map<string, Month>()
  private retry: Timer | null = null

  constructor(
    private readonly store: NoticeStore,
    private readonly logger: Logger,
    private readonly opts: {
      /** This process's claim token (batch/recorder.ts instanceId()). */
      token: string
      clock: Clock
      /** A claim the store did not decide (told once a minute by the caller's trouble log). */
      onError?: (err: unknown) => void
      onBack?: () => void
    }
  ) {}

  /** A call of a team's month, with the count it saw (after it, when it was admitted). */
  seen(ref: LedgerRef, used: number, quota: number): void {
    if (quota <= 0) return
    const k = `${ref.team}\n${ref.month}`
    let m = this.months.get(k)
    if (m === undefined) {
      // A new month: the last one's entries go (one month per team is kept).
      if (this.months.size > 1000) this.months.clear()
      this.months.set(k, (m = { ref, states: { 80: 'open', 100: 'open' }, used, quota }))
    }
    m.used = used
    m.quota = quota
    // Under a threshold again (a credit, a raised quota): it is armed again.
    if (used * 5 < quota * 4 && m.states[80] === 'decided') m.states[80] = 'open'
    if (used < quota && m.states[100] === 'decided') m.states[100] = 'open'
    this.ask(m)
  }

  private ask(m: Month): void {
    if (m.used * 5 < m.quota * 4) return
    if (m.states[80] === 'open') return void this.claim(m, 80)
    // The 100 % line only once the 80 % one is decided.
    if (m.states[80] === 'decided' && m.used >= m.quota && m.states[100] === 'open')
      void this.claim(m, 100)
  }

  private async claim(m: Month, threshold: 80 | 100): Promise<void> {
    m.states[threshold] = 'asking'
    let won: boolean
    try {
      won = await this.store.claimNotice(m.ref, threshold, this.opts.token)
    } catch (err) {
      m.states[threshold] = 'open'
      this.opts.onError?.(err)
      this.retryLater()
      return
    }
    this.opts.onBack?.()
    m.states[threshold] = 'decided'
    if (won) {
      const reset = Math.ceil(m.ref.endMs / 1000)
      this.logger.warn(
        { team: m.ref.team, used: m.used, quota: m.quota, reset },
        MESSAGE[threshold]
      )
    }
    this.ask(m) // the 100 % one, when the count is there too
  }

  /** Undecided claims are asked again, whether or not another call of the team comes. */
  private retryLater(): void {
    if (this.retry !== null) return
    this.retry = every(this.opts.clock, NOTICE_RETRY_MS, () => {
      let open = false
      for (const m of this.months.values()) {
        if (m.states[80] === 'asking' || m.states[100] === 'asking') open = true
        else if (this.due(m)) {
          open = true
          this.ask(m)
        }
      }
      if (!open) this.stop()
    })
  }

  private due(m: Month): boolean {
    if (m.used * 5 < m.quota * 4) return false
    return m.states[80] === 'open' || (m.used >= m.quota && m.states[100] === 'open')
  }

  stop(): void {
    this.retry?.cancel()
    this.retry = null
  }
}
