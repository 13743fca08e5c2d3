import type { Admission } from '../http/call.js'
import { createDayClock, createMonthClock } from '../quota/month.js'
import type { LedgerRef, MonthlyCharge } from '../types.js'
import type { LedgerRecorder } from '../usage/ledger-recorder.js'
import type { MonthlyNotices } from '../usage/notices.js'
import type { UsageRecorder } from '../usage/recorder.js'
import { CEILING, familyOf, OTHERS_FAMILY, ruleWords } from '../tuning/family.js'
import type { ShapeRecorder } from '../tuning/recorder.js'
import { othersOf, type Keeper } from '../usage/keep.js'
import { MEMO_KEY_MAX } from '../request/memo.js'

// SPEC §5 at a call's end (spine's end(), beside its line, not inside it): what the call adds
// to the usage over time and the ledger, and whether its team's month crossed a notice's
// threshold. A call counts when it was admitted and kept (not given back):
// - its base's day (batched, usage/recorder.ts);
// - its team's month and day: already in the ledger when a rate-limit script charged the
//   month; written late (usage/ledger-recorder.ts) when none did (monthly quotas off) or when
//   this process's fallback admitted it while the store did not answer.
// And SPEC §11: how its key's calls fall in time (tuning/recorder.ts), admitted or refused, by
// route family; a base call also on its client's ip_ceiling series.
// SPEC §4: a key not worth keeping (usage/keep.ts) counts in its class's `others`, by day and
// in the evidence, so what a flood of one-off keys leaves in the store does not grow with it.

export interface AccountingDeps {
  usage?: UsageRecorder
  ledger?: LedgerRecorder
  notices?: MonthlyNotices
  /** monthly.timezone in force. */
  timezone: () => string
  /** monthly.enabled in force. */
  monthlyEnabled: () => boolean
  /** SPEC §11: the shapes of keys' calls. */
  shapes?: ShapeRecorder
  /** SPEC §6: a client's key (an IPv6 client by its prefix), for its ip_ceiling series. */
  ipKeyOf?: (ip: string) => string
  /** SPEC §4: which keys are kept by name (the rest count in `others`); every key without it. */
  keeper?: Keeper
  /** The rules in force (their words stay in the route families, SPEC §11). */
  rules?: () => readonly { path: string }[]
}

/** SPEC §4 "came within a tenth of a limit": a rate window at 90 % of its limit, or over it. */
export function nearALimit(a: Admission): boolean {
  if (a.refused === 'rate') return true
  const d = a.decision
  if (d === null) return false
  const charges = a.classification.charges
  for (let i = 0; i < charges.length; i++) {
    const w = d.windows[i]!
    if (charges[i]!.kind !== 'monthly' && w.unknown !== true && w.used * 10 >= w.limit * 9)
      return true
  }
  return false
}

export type Account = (
  admission: Admission | null,
  givenBack: boolean,
  nowMs: number,
  /** The call's method and normalised path (null: it had none), for its route family. */
  method?: string,
  path?: string | null
) => void

const NO_RULES: readonly { path: string }[] = []

/** Route families of recent paths (a path's family is worked out once while it stays here). */
const FAMILY_CACHE = 4096

function monthlyChargeOf(a: Admission): MonthlyCharge | null {
  for (const c of a.classification.charges) if (c.kind === 'monthly') return c
  return null
}

/** A call's route family, worked out once per method and path while they stay cached. */
function createFamilyCache(
  rulePaths: () => readonly { path: string }[]
): (method: string, path: string) => string {
  // By method, then path: no string is built per call, and the family is the cached object.
  const families = new Map<string, Map<string, string>>()
  let cached = 0
  let rules: readonly { path: string }[] | null = null
  let words: ReadonlySet<string> = new Set()
  return (method, path) => {
    // The rules' words (a reload may change them): the cache starts again with them.
    const now = rulePaths()
    if (now !== rules) {
      rules = now
      words = ruleWords(now.map((r) => r.path))
      families.clear()
      cached = 0
    }
    // A long path is not kept (memo.ts): its family is worked out each time.
    if (path.length > MEMO_KEY_MAX) return familyOf(method, path, words)
    let byPath = families.get(method)
    if (byPath === undefined) families.set(method, (byPath = new Map()))
    let f = byPath.get(path)
    if (f === undefined) {
      if (cached >= FAMILY_CACHE) {
        for (const m of families.values()) m.clear()
        cached = 0
      }
      byPath.set(path, (f = familyOf(method, path, words)))
      cached++
    }
    return f
  }
}

/** A client's ip_ceiling key (`ip:<key>`), built once while the client stays cached. */
function createCeilingCache(ipKeyOf: (ip: string) => string): (ip: string) => string {
  const ceilings = new Map<string, string>()
  return (ip) => {
    let k = ceilings.get(ip)
    if (k === undefined) {
      if (ceilings.size >= FAMILY_CACHE) ceilings.clear()
      ceilings.set(ip, (k = `ip:${ipKeyOf(ip)}`))
    }
    return k
  }
}

export function createAccounting(deps: AccountingDeps): Account {
  let zone = ''
  let dayOf = createDayClock('UTC')
  let monthOf = createMonthClock('UTC')
  /** A team's month and the call's day, where no charge names them (monthly quotas off). */
  const placeOf = (team: string, nowMs: number): { ref: LedgerRef; day: string } => {
    const z = deps.timezone()
    if (z !== zone) {
      zone = z
      dayOf = createDayClock(z)
      monthOf = createMonthClock(z)
    }
    const m = monthOf(nowMs)
    return { ref: { team, month: m.id, endMs: m.endMs }, day: dayOf(nowMs).id.slice(8) }
  }

  const familyAt = createFamilyCache(deps.rules ?? (() => NO_RULES))
  const ceilingOf = createCeilingCache((ip) => deps.ipKeyOf!(ip))
  const keeper = deps.keeper
  /** SPEC §11: every call a key's windows saw, kept or refused (a give-back never counted). */
  const shape = (a: Admission, byName: boolean, nowMs: number, method: string, path: string) => {
    const { cls, key } = a.classification
    if (cls === 'exempt') return
    if (byName) deps.shapes!.record(key, familyAt(method, path), nowMs, a.refused)
    else deps.shapes!.record(othersOf(cls), OTHERS_FAMILY, nowMs, a.refused)
    if (cls !== 'other' && key.startsWith('base:') && deps.ipKeyOf !== undefined) {
      const ceiling = ceilingOf(a.clientIp)
      if (keeper === undefined || keeper.see(ceiling, nowMs, false))
        deps.shapes!.record(ceiling, CEILING, nowMs, a.refused)
      else deps.shapes!.record(othersOf('ip_ceiling'), OTHERS_FAMILY, nowMs, a.refused)
    }
  }

  return function account(a, givenBack, nowMs, method, path) {
    if (a === null) return
    const { key, team, cls } = a.classification
    // A given-back call never happened for the windows: it counts nowhere, kept or not.
    const byName =
      givenBack || cls === 'exempt' || keeper === undefined
        ? true
        : keeper.see(key, nowMs, nearALimit(a))
    if (deps.shapes !== undefined && !givenBack && method !== undefined && path != null)
      shape(a, byName, nowMs, method, path)
    // Admitted and kept (allowed and exempt calls too: they are served, only never charged).
    const kept = a.refused === null && !givenBack
    if (kept && key.startsWith('base:'))
      deps.usage?.record(byName ? key.slice(5) : othersOf(cls), nowMs)
    const monthly = team === undefined ? null : monthlyChargeOf(a)
    if (kept && team !== undefined) {
      if (!deps.monthlyEnabled()) {
        const { ref, day } = placeOf(team, nowMs)
        deps.ledger?.record(ref, day)
      } else if (monthly !== null && a.decision?.local === true) {
        // With quotas on, only what a charge put in the month is in its days (an allowed base's
        // calls are charged nowhere): the fallback's charges are owed to the shared ledger.
        deps.ledger?.record(
          { team, month: monthly.month, endMs: monthly.endMs },
          monthly.day,
          a.decision.inDoubt
        )
      }
    }
    const m = a.monthly
    if (monthly !== null && m !== null && m.used !== null)
      deps.notices?.seen(
        { team: m.team, month: monthly.month, endMs: monthly.endMs },
        m.used,
        m.quota
      )
  }
}
