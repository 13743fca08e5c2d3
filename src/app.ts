import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex, Readable } from 'node:stream'
import type { Snapshot } from './config/snapshot.js'
import { normalizePath, splitTarget } from './http/normalize-path.js'
import type { Forwarder } from './http/proxy.js'
import { admit, type Admission } from './http/rate-limit.js'
import { sendJsonError, sendTooMany } from './http/respond.js'
import { checkSize } from './http/size-gate.js'
import { sizeCheckFor } from './http/size-limits.js'
import { createUpgradeHandler } from './http/websocket.js'
import { StoreError } from './limiter/store-error.js'
import type { Logger } from './observe/log.js'
import { REFUSAL_OF, type Metrics, type Outcome } from './observe/metrics.js'
import type { UsageSummary } from './observe/summary.js'
import type { LimiterStore } from './types.js'

export interface GatewayDeps {
  /** The current configuration snapshot; read once per request. */
  snapshot: () => Snapshot
  store: LimiterStore
  forwarder: Forwarder
  logger: Logger
  /** The upstream's URL, for WebSocket upgrades (which bypass the pool). */
  upstreamUrl: string
  metrics?: Metrics
  summary?: UsageSummary
  now?: () => number
}

export interface Gateway {
  handleRequest(req: IncomingMessage, res: ServerResponse): void
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void
  /** Open WebSocket tunnels, for graceful shutdown. */
  readonly tunnels: ReadonlySet<Duplex>
}

const STORE_DOWN = 'the rate-limit store is unavailable; try again shortly'

const MESSAGE: Partial<Record<Outcome, string>> = {
  rate_limited: 'refused: over limit',
  monthly_limited: 'refused: monthly quota used up',
  size_refused: 'refused: size limit',
  dry_run: 'over a limit (dry-run: forwarded)',
}

/** The request's way through: normalise → classify → count → refuse or forward → log. */
export function createGateway(deps: GatewayDeps): Gateway {
  const { store, forwarder, logger, metrics, summary } = deps
  const now = deps.now ?? Date.now

  function outcomeOf(adm: Admission, status: number, extra?: Record<string, unknown>): Outcome {
    if (extra?.dry_run) return 'dry_run'
    if (extra?.refused === 'size') return 'size_refused'
    if (status === 429 && adm.overLimit)
      return adm.monthly?.refused ? 'monthly_limited' : 'rate_limited'
    if (extra?.upstream_error) return 'upstream_error'
    return 'forwarded'
  }

  /** One line, one count, one summary entry per request; the outcome decides level and message. */
  function logLine(
    method: string,
    path: string,
    adm: Admission,
    status: number,
    started: number,
    upstreamMs: number | null,
    extra?: Record<string, unknown>
  ): void {
    const w = adm.window
    const m = adm.monthly
    const cls = adm.classification.cls
    const outcome = outcomeOf(adm, status, extra)
    const line = {
      method,
      path,
      class: cls,
      key: adm.classification.key,
      limit: w?.limit,
      remaining: w?.remaining,
      reset: w?.resetSec,
      team: m?.team,
      used: m?.used,
      quota: m?.quota,
      status,
      duration_ms: Math.round((performance.now() - started) * 100) / 100,
      upstream_ms: upstreamMs === null ? undefined : Math.round(upstreamMs * 100) / 100,
      ...extra,
    }
    // SPEC §7: refusals (and dry-run would-be refusals) at warn.
    if (REFUSAL_OF[outcome] === undefined) logger.info(line, 'request')
    else logger.warn(line, MESSAGE[outcome])

    summary?.record(adm.classification.key)
    if (m !== null) summary?.recordMonthly(m.team, m.used, m.quota)
    if (metrics) {
      metrics.countRequest(cls, outcome)
      if (upstreamMs !== null) metrics.upstreamDuration.observe(upstreamMs / 1000)
      if (m !== null) {
        metrics.monthlyUsed.set({ team: m.team }, m.used)
        metrics.monthlyQuota.set({ team: m.team }, m.quota)
      }
    }
  }

  /** Rate check shared by plain requests and upgrades; answers 400/503 itself. */
  async function check(
    req: IncomingMessage,
    fail: (status: number, message: string, headers?: Record<string, number>) => void
  ): Promise<{ adm: Admission; path: string; query: string; snap: Snapshot } | null> {
    const snap = deps.snapshot()
    const { path: rawPath, query } = splitTarget(req.url ?? '/')
    const norm = normalizePath(rawPath)
    if (!norm.ok) {
      fail(400, norm.reason)
      logger.warn({ method: req.method, status: 400, reason: norm.reason }, 'refused: bad path')
      metrics?.countRequest('unknown', 'bad_path')
      return null
    }
    try {
      return { adm: await admit(snap, store, req, norm.path, now()), path: norm.path, query, snap }
    } catch (err) {
      if (!(err instanceof StoreError)) throw err
      fail(503, STORE_DOWN, { 'retry-after': 1 })
      logger.warn(
        { method: req.method, path: norm.path, status: 503 },
        'refused: store unavailable'
      )
      metrics?.countRequest('unknown', 'store_unavailable')
      return null
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now()
    const method = req.method ?? 'GET'
    const checked = await check(req, (status, message, headers) =>
      sendJsonError(res, status, message, headers ?? null)
    )
    if (checked === null) return
    const { adm, path, query, snap } = checked
    const dryRunMode = snap.config.mode === 'dry-run'
    const extra: Record<string, unknown> = {}
    if (adm.overLimit) {
      if (!dryRunMode) {
        sendTooMany(res, adm.headers!)
        logLine(method, path, adm, 429, started, null)
        return
      }
      // SPEC §4 dry-run: forwarded, logged at warn, not charged (the store charged nothing).
      extra.dry_run = true
      delete adm.headers!['retry-after']
    }

    // SPEC §4 size limits, after the rate check: a size-refused call has used its slot.
    let body: Buffer | Readable | undefined
    const sizeCheck = sizeCheckFor(method, path)
    if (sizeCheck !== null) {
      const size = await checkSize(sizeCheck, req, query, snap.config.sizeLimits, dryRunMode)
      if (size.aborted) return
      if (size.note) logger.debug({ method, path, note: size.note }, 'size check: not counted')
      if (size.refusal) {
        const r = size.refusal
        const detail = {
          refused: 'size',
          size_limit: r.limitName,
          count: r.count,
          error_msg: r.message,
        }
        if (!dryRunMode) {
          // A body left unread past max_body_bytes is not read: the connection closes.
          if (r.status === 413) res.setHeader('connection', 'close')
          sendJsonError(res, r.status, r.message, adm.headers)
          logLine(method, path, adm, r.status, started, null, detail)
          return
        }
        Object.assign(extra, detail, { dry_run: true })
      }
      body = size.body
    }

    forwarder.forward(
      req,
      res,
      path + query,
      adm.headers,
      (r) =>
        logLine(
          method,
          path,
          adm,
          r.status,
          started,
          r.upstreamMs,
          r.error ? { ...extra, upstream_error: r.error } : extra
        ),
      body
    )
  }

  function handleRequest(req: IncomingMessage, res: ServerResponse): void {
    handle(req, res).catch((err: unknown) => {
      // Nothing a request does may crash the process; the client gets a 500 or a closed socket.
      logger.error(
        { err: { message: (err as Error)?.message, stack: (err as Error)?.stack } },
        'request failed'
      )
      if (!res.headersSent) sendJsonError(res, 500, 'internal error')
      else res.destroy()
    })
  }

  const upgrade = createUpgradeHandler({ upstreamUrl: deps.upstreamUrl, logger, check, logLine })
  return { handleRequest, handleUpgrade: upgrade.handle, tunnels: upgrade.tunnels }
}
