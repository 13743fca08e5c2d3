import { shownKey } from '../request/base-uuid.js'
import type { Interval, TuneReport } from './report.js'

// SPEC §11 on a terminal: the report as tables a person reads. Pure.

const n = (x: number) => x.toLocaleString('en-US')
/** A key as operators search for it: a base by its hyphenated UUID. */
const keyName = (key: string) => {
  const k = shownKey(key)
  return /^base:[0-9a-f]{8}-/.test(k) ? `base ${k.slice(5)}` : k.replace(/^ip:/, 'client ')
}
const between = (i: Interval) => (i.lo === i.hi ? n(i.lo) : `between ${n(i.lo)} and ${n(i.hi)}`)

function table(head: string[], rows: string[][], right: ReadonlySet<number> = new Set()): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const fmt = (row: string[]) =>
    row
      .map((c, i) => (right.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd()
  return [fmt(head), fmt(widths.map((w) => '-'.repeat(w))), ...rows.map(fmt)]
}

export function formatTuneReport(r: TuneReport): string {
  const out: string[] = [
    `Tuning report: the calls of ${r.from} to ${r.to} (${r.days} days, ${r.timezone}), judged under the candidate`,
  ]
  if (r.partial)
    out.push(`(partial: the first ${n(r.series_read)} key-days only; ask for fewer --days)`)
  out.push('')
  if (r.sections.length === 0) out.push('No rate limit differs from the running file.')
  for (const s of r.sections) {
    out.push(
      `${s.id}: ${s.running} → ${s.candidate}`,
      `  ${n(s.keys)} keys, ${n(s.calls)} calls; the running limits, replayed on these calls, refuse ${between(s.running_refused)}`,
      `  refused at the time, as recorded: ${n(s.refused_recorded)} (by every limit then in force, the month's quota and other windows included; issue #49)`,
      `  the candidate would have refused ${between(s.candidate_refused)}`
    )
    const moves = [
      ...s.more_refused.map((m) => ['more', m] as const),
      ...s.fewer_refused.map((m) => ['fewer', m] as const),
    ]
    if (moves.length > 0) {
      out.push('')
      const rows = moves.map(([what, m]) => [
        what,
        keyName(m.key),
        m.team ?? '-',
        n(m.calls),
        between(m.running),
        between(m.candidate),
      ])
      out.push(
        ...table(['refused', 'key', 'team', 'calls', 'now', 'candidate'], rows, new Set([3])).map(
          (l) => `  ${l}`
        )
      )
    }
    out.push('')
  }
  out.push(...monthlyLines(r), ...suggestionLines(r))
  return out.join('\n')
}

/** SPEC §11: the teams whose month the candidate changes, and the day each runs out. */
function monthlyLines(r: TuneReport): string[] {
  const lines: string[] = []
  if (r.monthly.length > 0) {
    lines.push('Monthly quotas:')
    const rows = r.monthly.flatMap((t) =>
      t.months.map((m) => [
        t.team,
        m.month,
        t.running_quota === null ? 'none' : n(t.running_quota),
        t.candidate_quota === null ? 'none' : n(t.candidate_quota),
        n(m.calls),
        m.running_runs_out ?? '-',
        m.candidate_runs_out ?? '-',
      ])
    )
    lines.push(
      ...table(
        ['team', 'month', 'quota now', 'candidate', 'calls', 'runs out now', 'with candidate'],
        rows,
        new Set([2, 3, 4])
      ).map((l) => `  ${l}`),
      ...r.monthly.flatMap((t) =>
        t.months
          .filter((m) => m.ledger_unread !== null)
          .map((m) => `  ${t.team} ${m.month}: ${m.ledger_unread}`)
      ),
      ''
    )
  }
  return lines
}

/** SPEC §11: each limit beside the keys' busiest minutes, the fit and what to set. */
function suggestionLines(r: TuneReport): string[] {
  const lines: string[] = []
  if (r.suggestions.length > 0) {
    lines.push("Suggested limits (the keys' busiest minute over the range):")
    const rows = r.suggestions.map((s) => [
      s.id,
      s.limit,
      n(s.keys),
      `${s.busiest_minute.p50} / ${s.busiest_minute.p90} / ${s.busiest_minute.p99} / ${s.busiest_minute.max}`,
      s.suggested,
      `${between(s.would_refuse)} on ${s.keys_refused} keys`,
      s.with_headroom,
    ])
    lines.push(
      ...table(
        [
          'window',
          'in force',
          'keys',
          'p50 / p90 / p99 / max',
          'suggested',
          'it would refuse',
          'with headroom',
        ],
        rows,
        new Set([2])
      ).map((l) => `  ${l}`)
    )
    lines.push(
      '  suggested: the lowest N/min no key passed in 99 % of its busiest minutes (a tight fit);',
      '  with headroom: its 1.5 ×, never below the busiest minute seen (what to set)'
    )
    for (const s of r.suggestions) if (s.note !== null) lines.push(`  ${s.id}: ${s.note}`)
  }
  return lines
}
