import { systemClock } from '../clock.js'
import { request } from 'undici'
import { redisClient, storeKindOf } from '../limiter/redis-client.js'
import { beyondHistory, upgradeReport } from '../history/report.js'
import { loadConfigOrExit } from './load.js'
import { adminUrl, exitNoReport } from './admin-reach.js'
import type { Flags } from '../config/flags.js'
import { HISTORY } from '../history/match.js'
import { RedisReportStore } from '../history/report-store.js'
import { fetchServerVersion } from '../history/server-version.js'
import { parseVersion } from '../history/version.js'
import type { Config } from '../types.js'

type Report = Awaited<ReturnType<typeof upgradeReport>>

/**
 * The report as the running instance has it (its counts up to this moment included), or what
 * the admin API said instead: a 401 is a wrong token, not a missing instance (issue #34).
 */
async function fromAdmin(
  config: Config,
  to: string,
  from: string | undefined
): Promise<Report | { answered: string; reached: boolean }> {
  const q = new URLSearchParams({ to, ...(from ? { from } : {}) })
  try {
    const r = await request(`${adminUrl(config)}/v1/upgrade-report?${q}`, {
      headers: config.admin.token ? { authorization: `Bearer ${config.admin.token}` } : {},
      headersTimeout: 3000,
      bodyTimeout: 3000,
    })
    if (r.statusCode !== 200) {
      const text = await r.body.text().catch(() => '')
      let said = ''
      try {
        said = String((JSON.parse(text) as { error_msg?: unknown }).error_msg ?? '')
      } catch {
        // not JSON: the status says enough
      }
      const hint =
        r.statusCode === 401
          ? config.admin.token
            ? ": admin.token in this file is not the running instance's"
            : ': the running instance has an admin.token and this file has none'
          : ''
      return {
        answered: `answered ${r.statusCode}${said ? ` (${said})` : ''}${hint}`,
        reached: true,
      }
    }
    return (await r.body.json()) as Report
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'no answer'
    return { answered: `did not answer (${code})`, reached: false }
  }
}

/** The report read straight from the shared store (no instance running). */
async function fromStore(
  config: Config,
  to: string,
  from: string | undefined
): Promise<Report | null> {
  const s = config.store
  if (storeKindOf(s) === 'memory') return null
  // The gateway's own client (a Cluster's password and TLS included); it may wait to connect.
  const client = redisClient(s, { offlineQueue: true, commandTimeoutMs: 5000 })
  try {
    const version =
      from ??
      (config.server.version !== 'auto'
        ? config.server.version
        : await fetchServerVersion(config.upstream.url, 2000))
    return await upgradeReport(
      HISTORY,
      new RedisReportStore(client, s.prefix),
      version,
      to,
      systemClock.now()
    )
  } catch {
    return null
  } finally {
    client.disconnect()
  }
}

/** A table a terminal reads: one row per entry, busiest first, then what to change and who calls it. */
export function formatReport(r: Report): string {
  const lines = [
    `Upgrade ${r.from ?? '(unknown version)'} → ${r.to}: calls of the last 35 days that the upgrade breaks`,
    '',
  ]
  const rows = r.entries.map((e) => [
    e.version,
    e.date ?? '',
    e.id,
    String(e.calls),
    e.last_seen ? e.last_seen.slice(0, 16).replace('T', ' ') : '-',
  ])
  const head = ['version', 'date', 'entry', 'calls', 'last seen (UTC)']
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)))
  const fmt = (row: string[]) =>
    row
      .map((c, i) => (i === 3 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd()
  lines.push(fmt(head), fmt(widths.map((w) => '-'.repeat(w))), ...rows.map(fmt))
  if (r.entries.length === 0)
    lines.push('(nothing in the change history breaks between these versions)')
  for (const e of r.entries.filter((x) => x.calls > 0)) {
    lines.push('', `${e.id}: ${e.what}${e.replacement ? ` → use ${e.replacement}` : ''}`)
    for (const k of e.top_keys.slice(0, 5))
      lines.push(`  ${String(k.calls).padStart(widths[3]!)}  ${k.key}`)
  }
  return lines.join('\n')
}

/** `basegate upgrade-report --to X [--from Y] [--config FILE]`: exit 0, or 2 with the reason. */
export async function runUpgradeReport(
  load: { file: string; flags: Flags; env: NodeJS.ProcessEnv },
  to: string | undefined,
  from: string | undefined
): Promise<never> {
  const version = parseVersion(to ?? '')
  if (version === null) {
    process.stderr.write('--to: give the version to upgrade to, e.g. --to 6.2\n')
    process.exit(2)
  }
  const beyond = beyondHistory(HISTORY, version)
  if (beyond !== null) {
    process.stderr.write(`--to: ${beyond}\n`)
    process.exit(2)
  }
  if (from !== undefined && parseVersion(from) === null) {
    process.stderr.write(`--from: ${JSON.stringify(from)} is not a version\n`)
    process.exit(2)
  }
  const { config } = await loadConfigOrExit(load.file, load.env, load.flags)
  const admin = await fromAdmin(config, version, from)
  const report = 'answered' in admin ? await fromStore(config, version, from ?? undefined) : admin
  if (report !== null && 'answered' in admin && admin.reached)
    process.stderr.write(
      `the admin API at ${adminUrl(config)} ${admin.answered}; the report below is the shared store's (at most a few seconds behind)\n`
    )
  if (report === null) exitNoReport(config, 'answered' in admin ? admin.answered : '', 'the report')
  process.stdout.write(formatReport(report) + '\n')
  process.exit(0)
}
