import { createMonthClock, type MonthBounds } from '../quota/month.js'
import type { Logger } from '../types.js'
import type { UsageStore } from './store.js'

// SPEC §5 notices: when a team's use in a month first reaches 80 % and then 100 % of its quota,
// one warn line, once per team, threshold and month across every instance sharing the store
// (the store decides who says it: a SET NX). A process asks the store at most once per team,
// threshold and month; the request that crosses a threshold pays a map lookup.

const MESSAGE: Record<80 | 100, string> = {
  80: 'monthly quota 80% used',
  100: 'monthly quota used up',
}

export class MonthlyNotices {
  /** `team\nmonth\nthreshold` this process has asked about (bounded: teams × 2, per month). */
  private readonly asked = new Set<string>()
  private month = ''
  private zone = ''
  private monthOf: (nowMs: number) => MonthBounds = () => {
    throw new Error('no zone')
  }

  constructor(
    private readonly store: UsageStore,
    private readonly logger: Logger,
    private readonly timezone: () => string,
    private readonly onError: (err: unknown) => void = () => {}
  ) {}

  /** A call of a team's month, with the count it saw (after it, when it was admitted). */
  seen(team: string, used: number, quota: number, nowMs: number): void {
    if (quota <= 0 || used * 5 < quota * 4) return
    const zone = this.timezone()
    if (zone !== this.zone) {
      this.zone = zone
      this.monthOf = createMonthClock(zone)
    }
    const m = this.monthOf(nowMs)
    if (m.id !== this.month) {
      this.month = m.id
      this.asked.clear()
    }
    const top = used >= quota ? 100 : 80
    const k = `${team}\n${m.id}\n${top}`
    if (this.asked.has(k)) return
    this.asked.add(k)
    // The 100 % line follows the 80 % one: a team that jumps past both says the 80 % first.
    const k80 = `${team}\n${m.id}\n80`
    const first = top === 100 && !this.asked.has(k80) ? this.say(team, m, 80, used, quota) : null
    this.asked.add(k80)
    void (first ?? Promise.resolve()).then(() => this.say(team, m, top, used, quota))
  }

  private async say(
    team: string,
    m: MonthBounds,
    threshold: 80 | 100,
    used: number,
    quota: number
  ): Promise<void> {
    try {
      // Kept a day past the month's end, so a late instance cannot say it again.
      const won = await this.store.claimNotice(team, m.id, threshold, m.endMs + 86_400_000)
      if (!won) return
      const reset = Math.ceil(m.endMs / 1000)
      this.logger.warn({ team, used, quota, reset }, MESSAGE[threshold])
    } catch (err) {
      // Not decided: a later call asks again.
      this.asked.delete(`${team}\n${m.id}\n${threshold}`)
      this.onError(err)
    }
  }
}
