import type { RequestClass } from '../types.js'

/**
 * Every store key basegate writes, in one place (without the configured prefix).
 *
 * Redis Cluster runs a script on one slot, so the part in braces (the hash tag) decides which
 * windows one script call can see together:
 * - `{b:<uuid>}`: every rate window of a base (class and rules). A base's rate keys never
 *   depend on its team, so moving a base between teams keeps its counts (issue #11).
 * - `{ip:<addr>}`: every rate window of a client counted per IP, and its `ip_ceiling`.
 * - `{t:<team>}`: a team's monthly ledger (its month's count and its days, one hash), its
 *   credits, its notices and its quota set through the admin API, together, so the script
 *   reads the quota in the slot it charges, and a credit re-arms the notices in one call.
 *   Beside a ledger, per store connection that charged it within the hour,
 *   `<ledger>:k:<store id>` (`ledgerRing`): the tags of its last 512 checks (2 KB), so a call owed after an
 *   unanswered check is written only if that check did not charge it (limiter/lua/check.lua).
 * A request on a team's base therefore spans two slots ({b:} and {t:}), and one with an
 * `ip_ceiling` spans {b:} and {ip:}. The Redis store checks such a request slot by slot and
 * refunds the earlier slots when a later one refuses (limiter/redis-store.ts): that can only
 * over-refuse, never over-admit. Outside Cluster mode all of it is one script call.
 */
/**
 * The layout of a sliding window's hash, in every window key's name (`…:l2`). Old and new
 * instances run on one Redis during a rolling upgrade; a layout change renames the keys, so
 * neither ever reads a hash it does not understand (issue #14). Layout 1 was the bucket fields
 * alone; layout 2 adds the running total `t` and the oldest live bucket `o`
 * (limiter/lua/prelude.lua). During such an upgrade each generation counts in its own keys.
 */
export const WINDOW_LAYOUT = 2
const L = `:l${WINDOW_LAYOUT}`

export const keys = {
  /** The subject of a request's rate windows: its base, or its client. */
  subject: (uuid: string | null, ipKey: string): string =>
    uuid === null ? `{ip:${ipKey}}` : `{b:${uuid}}`,
  /** SPEC §10: the subject of a team's shared windows (a `shared: true` override). */
  teamSubject: (team: string): string => `{t:${team}}`,
  cls: (subject: string, cls: RequestClass, windowMs: number) =>
    `${subject}:${cls}:${windowMs}${L}`,
  rule: (subject: string, rule: string, windowMs: number) =>
    `${subject}:rule:${rule}:${windowMs}${L}`,
  ipCeiling: (ipKey: string, windowMs: number) => `{ip:${ipKey}}:ceiling:${windowMs}${L}`,
  /**
   * SPEC §5 "One ledger": a team's month, one hash: `used`, `d<DD>` (calls per day), `c<DD>`
   * (credited per day), `q` (the quota at the last charge), `s:<process>` (late batches seen).
   * Named `ledger` where 0.5 had `month` (a counter): the two generations never share a key.
   */
  ledger: (team: string, monthId: string) => `{t:${team}}:ledger:${monthId}`,
  /** SPEC §5: the ring of one store connection's charging checks, beside a ledger (its key as given). */
  ledgerRing: (ledgerKey: string, store: string) => `${ledgerKey}:k:${store}`,
  /** SPEC §5 credits of a team's month, a list of entries (JSON), oldest first. */
  credits: (team: string, monthId: string) => `{t:${team}}:credits:${monthId}`,
  /** A team's quota set through the admin API (its `quota` field), and its other changes. */
  teamChange: (team: string) => `{t:${team}}:team`,
  /** SPEC §5 usage over time: a base's (`b:<uuid>`) calls per day of a month. */
  usageDays: (subject: string, monthId: string) => `{u:${subject}}:days:${monthId}`,
  /**
   * SPEC §5 export: the bases with calls in a month, a set in 16 shards (by the UUID's first
   * digit), so one month of many bases is neither one large key nor one busy Cluster slot.
   */
  usageIndex: (monthId: string, uuid: string) => `{u:index:${uuid[0]}}:${monthId}`,
  usageIndexes: (monthId: string): string[] =>
    [...'0123456789abcdef'].map((x) => `{u:index:${x}}:${monthId}`),
  /**
   * SPEC §11 tuning evidence: one key's calls of one route family on one day (a hash: `t`,
   * `r`, `m`, an `hHH` field per hour). All of a key's families share its Cluster slot.
   */
  shape: (subject: string, day: string, family: string) => `{sh:${subject}}:${day}:${family}`,
  /** SPEC §11: the key-days of one day with calls, a set in 16 shards (`<key>\t<family>`). */
  shapeIndex: (day: string, shard: string) => `{sh:index:${shard}}:${day}`,
  /**
   * SPEC §8 upgrade report: one change-history entry's calls of a UTC day (`count:<day>`, a
   * hash), its busiest keys that day (`keys:<day>`, a sorted set) and when last seen (`last`).
   * All of an entry's keys share its Cluster slot.
   */
  report: (entry: string, what: `count:${number}` | `keys:${number}` | 'last') =>
    `{h:${entry}}:${what}`,
  /** Team changes made through the admin API: the list of teams changed, and its channel. */
  teamsChanged: 'teams:changed',
  teamsChannel: 'teams',
  /** SPEC §10 overrides set through the admin API. */
  overrides: 'overrides',
  /** SPEC §5 notices: (team, month, threshold) was said, once for every instance. */
  notice: (team: string, monthId: string, threshold: number) =>
    `{t:${team}}:notice:${monthId}:${threshold}`,
} as const
