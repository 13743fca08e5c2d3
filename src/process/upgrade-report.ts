import { systemClock } from '../clock.js'
import { request } from 'undici'
import { redisClient, storeKindOf } from '../limiter/redis-client.js'
import { beyondHistory, upgradeReport } from '../history/report.js'
import { loadConfigOrExit } from './load.js'
import type { Flags } from '../config/flags.js'
import { HISTORY } from '../history/match.js'
import { RedisReportStore } from '../history/report-store.js'
import { fetchServerVersion } from '../history/server-version.js'
import { parseVersion } from '../history/version.js'
import type { Config } from '../types.js'

type Report = Awaited<ReturnType<typeof upgradeReport>>

/** The report as the running instance has it (its counts up to this moment included). */
async function fromAdmin(
  config: Config,
  to: string,
  from: string | undefined
): Promise<Report | null> {
  const host =
    config.admin.host === '0.0.0.0'
      ? '127.0.0.1'
      : config.admin.host === '::'
        ? '::1'
        : config.admin.host
  const q = new URLSearchParams({ to, ...(from ? { from } : {}) })
  try {
    const r = await request(
      `http://${host.includes(':') ? `[${host}]` : host}:${config.admin.port}/v1/upgrade-report?${q}`,
      {
        headers: config.admin.token ? { authorization: `Bearer ${config.admin.token}` } : {},
        headersTimeout: 3000,
        bodyTimeout: 3000,
      }
    )
    if (r.statusCode !== 200) {
      await r.body.dump()
      return null
    }
    return (await r.body.json()) as Report
  } catch {
    return null
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
  const report =
    (await fromAdmin(config, version, from)) ??
    (await fromStore(config, version, from ?? undefined))
  if (report === null) {
    process.stderr.write(
      `no report: the admin API at ${config.admin.host}:${config.admin.port} did not answer, and the store is ${config.store.url || config.store.cluster.length ? 'out of reach' : 'in-memory (the report lives in the running process)'}\n`
    )
    process.exit(2)
  }
  process.stdout.write(formatReport(report) + '\n')
  process.exit(0)
}
