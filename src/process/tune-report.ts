import { readFileSync } from 'node:fs'
import { request } from 'undici'
import { systemClock } from '../clock.js'
import { compileSnapshot } from '../http/snapshot.js'
import { redisClient, storeKindOf } from '../limiter/redis-client.js'
import { RedisStore } from '../limiter/redis-store.js'
import { formatTuneReport } from '../tuning/format.js'
import { tuneReport, type TuneReport } from '../tuning/report.js'
import { RedisShapeStore } from '../tuning/shape-store.js'
import type { Config } from '../types.js'
import { ledgerRef } from '../usage/ledger-view.js'
import { loadConfigOrExit } from './load.js'
import { adminUrl, exitNoReport } from './admin-reach.js'
import { loadConfigFile } from '../config/load.js'
import { daysOf } from '../admin/tuning.js'

// `basegate tune-report --config CANDIDATE.yaml [--days N] [--json] [--running FILE]` (SPEC §11):
// the candidate is checked here first (its problems, exit 2); then the running instance's admin
// API judges it (POST /v1/tuning: its file, its counts up to now); when none answers, the
// shared store is read directly with the running file (--running, $BASEGATE_CONFIG, or
// ./limits.yaml).

/** The admin listener a file names, as a client reaches it. */
async function fromAdmin(
  running: Config,
  text: string,
  days: number
): Promise<TuneReport | { answered: string; reached: boolean }> {
  try {
    const r = await request(`${adminUrl(running)}/v1/tuning?days=${days}`, {
      method: 'POST',
      body: text,
      headers: {
        'content-type': 'application/yaml',
        ...(running.admin.token ? { authorization: `Bearer ${running.admin.token}` } : {}),
      },
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    })
    const answer = await r.body.text()
    if (r.statusCode === 200) return JSON.parse(answer) as TuneReport
    let said = ''
    try {
      const j = JSON.parse(answer) as { error_msg?: string; problems?: string[] }
      said = [j.error_msg, ...(j.problems ?? [])].filter(Boolean).join('; ')
    } catch {
      // not JSON: the status says enough
    }
    return { answered: `answered ${r.statusCode}${said ? ` (${said})` : ''}`, reached: true }
  } catch (err) {
    return {
      answered: `did not answer (${(err as NodeJS.ErrnoException).code ?? 'no answer'})`,
      reached: false,
    }
  }
}

async function fromStore(
  running: Config,
  candidate: Config,
  days: number
): Promise<TuneReport | null> {
  if (storeKindOf(running.store) === 'memory') return null
  const client = redisClient(running.store, { offlineQueue: true, commandTimeoutMs: 10_000 })
  try {
    const store = new RedisStore(client, { prefix: running.store.prefix, clock: systemClock })
    const zone = running.monthly.timezone
    return await tuneReport({
      running: compileSnapshot(running),
      candidate: compileSnapshot(candidate),
      store: new RedisShapeStore(client, running.store.prefix),
      days,
      nowMs: systemClock.now(),
      ledgerDays: async (team, month) =>
        (await store.readLedger(ledgerRef(team, month, zone))).days,
    })
  } catch {
    return null
  } finally {
    client.disconnect()
  }
}

export async function runTuneReport(opts: {
  candidateFile: string | undefined
  runningFile: string
  days: string | undefined
  json: boolean
  env: NodeJS.ProcessEnv
}): Promise<never> {
  if (opts.candidateFile === undefined) {
    process.stderr.write('--config: give the candidate file, e.g. --config limits.next.yaml\n')
    process.exit(2)
  }
  const days = daysOf(opts.days)
  if (typeof days !== 'number') {
    process.stderr.write(`--${days.error}\n`)
    process.exit(2)
  }
  const { config: candidate } = await loadConfigOrExit(opts.candidateFile, opts.env, {})
  const text = readFileSync(opts.candidateFile, 'utf8')
  // The running file says where the running instance listens; without one, the candidate does.
  let running = candidate
  const loaded = await loadConfigFile(opts.runningFile, opts.env, {}).catch(() => null)
  if (loaded?.ok === true) running = loaded.config
  else
    process.stderr.write(
      `the running file ${opts.runningFile} could not be read${loaded ? ` (${loaded.problems.map((p) => `${p.field}: ${p.message}`).join('; ')})` : ''}: the candidate's admin listener and store are asked (--running FILE names another)\n`
    )
  const admin = await fromAdmin(running, text, days)
  const report = 'answered' in admin ? await fromStore(running, candidate, days) : admin
  if (report === null)
    exitNoReport(running, 'answered' in admin ? admin.answered : '', 'the evidence')
  if ('answered' in admin && admin.reached)
    process.stderr.write(
      `the admin API at ${adminUrl(running)} ${admin.answered}; the report below is the shared store's, judged against ${opts.runningFile}\n`
    )
  process.stdout.write(
    (opts.json ? JSON.stringify(report, null, 2) : formatTuneReport(report)) + '\n'
  )
  process.exit(0)
}
