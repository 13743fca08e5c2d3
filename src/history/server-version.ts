import { request } from 'undici'
import { type Clock, type Timer } from '../clock.js'
import type { Logger } from '../types.js'
import { parseVersion } from './version.js'

const POLL_MS = 10 * 60_000
/** While the version is unknown: the first retry, and the longest wait between two. */
const RETRY_FIRST_MS = 1_000
const RETRY_MAX_MS = 30_000

/**
 * GET /server-info/ on the upstream: its major.minor (null when it answered without one), or
 * why it did not answer (the error's code).
 */
export async function askServerInfo(
  upstreamUrl: string,
  timeoutMs = 5000
): Promise<{ version: string | null } | { error: string }> {
  try {
    const base = upstreamUrl.replace(/\/+$/, '')
    const r = await request(`${base}/server-info/`, {
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    })
    if (r.statusCode !== 200) {
      await r.body.dump()
      return { version: null }
    }
    const body = (await r.body.json().catch(() => null)) as { version?: unknown } | null
    return { version: parseVersion(body?.version) }
  } catch (err) {
    return { error: (err as { code?: string }).code ?? (err as Error).name }
  }
}

/** GET /server-info/ on the upstream → its major.minor, or null (no answer, no version). */
export async function fetchServerVersion(
  upstreamUrl: string,
  timeoutMs = 5000
): Promise<string | null> {
  const r = await askServerInfo(upstreamUrl, timeoutMs)
  return 'version' in r ? r.version : null
}

export interface ServerVersionOptions {
  /** `server.version` of the running configuration: "6.2" or "auto" (read per call: reload applies). */
  configured: () => string
  upstreamUrl: string
  logger: Logger
  /** Told whenever the version in force changes (the metric). */
  onChange?: (version: string | null) => void
  pollMs?: number
  fetch?: (url: string) => Promise<string | null>
  /** The poll's timers (the system's clock by default). */
  clock: Clock
}

/**
 * SPEC §8: the server's version: fixed by `server.version`, or `auto`: read from the upstream's
 * /server-info/ at start and every 10 minutes. Unknown until it answers; one warning then,
 * and one line again when it becomes known or changes.
 */
export class ServerVersion {
  private fetched: string | null = null
  private timer: Timer | null = null
  private stopped = false
  private last: string | null | undefined = undefined

  constructor(private readonly opts: ServerVersionOptions) {}

  /** The version in force now, or null while unknown (read per request: no side effect). */
  current(): string | null {
    const c = this.opts.configured()
    return c === 'auto' ? this.fetched : parseVersion(c)
  }

  /** Says so when the version in force changed since it was last said (log line, metric). */
  private settle(): void {
    const v = this.current()
    if (v !== this.last) this.announce(v)
  }

  private announce(v: string | null): void {
    const source = this.opts.configured() === 'auto' ? 'auto (/server-info/)' : 'server.version'
    if (v === null) {
      this.opts.logger.warn(
        { source },
        'server version unknown: no 410s and no deprecation headers until it is known'
      )
    } else {
      this.opts.logger.info({ server_version: v, source }, 'server version known')
    }
    this.last = v
    this.opts.onChange?.(v)
  }

  /** Asks the upstream now (auto only); at start, on every poll and after every reload. */
  async refresh(): Promise<void> {
    if (this.opts.configured() !== 'auto') return this.settle()
    const fetch = this.opts.fetch ?? ((url: string) => fetchServerVersion(url))
    const v = await fetch(this.opts.upstreamUrl)
    // A failed poll keeps the last version known: a restarting upstream is still that version.
    if (v !== null) this.fetched = v
    this.settle()
  }

  /**
   * Asks now, then every pollMs once the version is known; while it is unknown (auto and no
   * answer yet: a server still starting), again after 1, 2, 4 … s, at most 30 s apart, so removed
   * endpoints are answered 410 within seconds of the server coming up (issue #25).
   */
  start(): void {
    this.stopped = false
    const poll = this.opts.pollMs ?? POLL_MS
    const first = Math.min(RETRY_FIRST_MS, poll)
    const longest = Math.min(RETRY_MAX_MS, poll)
    const unknown = () => this.opts.configured() === 'auto' && this.fetched === null
    const next = (waitMs: number): void => {
      if (this.stopped) return
      this.timer = this.opts.clock.setTimer(() => {
        void this.refresh().then(() => next(unknown() ? Math.min(waitMs * 2, longest) : poll))
      }, waitMs)
    }
    void this.refresh().then(() => next(unknown() ? first : poll))
  }

  stop(): void {
    this.stopped = true
    this.timer?.cancel()
  }
}
