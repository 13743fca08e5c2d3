import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { Snapshot } from '../config/snapshot.js'
import type { Classification, Decision, LimiterStore } from '../types.js'
import { rateHeaderValues, retryAfterSec, type RateHeaderValues } from './rate-headers.js'

/** What the rate check made of one request. */
export interface Admission {
  classification: Classification
  clientIp: string
  /** null when no window applies (exempt, unlimited). */
  decision: Decision | null
  /** The window with the fewest calls left (what the headers and the log line show). */
  window: RateHeaderValues | null
  /** Headers for the answer: x-ratelimit-* where `headers` says, retry-after on a refusal. */
  headers: OutgoingHttpHeaders | null
  /** The limits refuse this call (in dry-run it is forwarded all the same). */
  overLimit: boolean
  /** The team's month, when a monthly quota applies. */
  monthly: { team: string; used: number; quota: number; refused: boolean } | null
}

/**
 * Classifies the request and charges its windows in one store call. Throws StoreError only
 * when the store failed and on_error is closed.
 */
export async function admit(
  snapshot: Snapshot,
  store: LimiterStore,
  req: IncomingMessage,
  path: string,
  nowMs: number
): Promise<Admission> {
  const clientIp = snapshot.clientIp.clientIp(
    req.socket.remoteAddress,
    req.headers['x-forwarded-for']
  )
  const classification = snapshot.classifier.classify(
    req.method ?? 'GET',
    path,
    snapshot.clientIp.keyOf(clientIp),
    nowMs
  )
  if (classification.charges.length === 0) {
    return {
      classification,
      clientIp,
      decision: null,
      window: null,
      headers: null,
      overLimit: false,
      monthly: null,
    }
  }
  const decision = await store.consume(classification.charges, nowMs)
  const hv = rateHeaderValues(decision, classification.charges)!
  let headers: OutgoingHttpHeaders | null = null
  if (classification.emitHeaders) {
    headers = {
      'x-ratelimit-limit': hv.limit,
      'x-ratelimit-remaining': hv.remaining,
      'x-ratelimit-reset': hv.resetSec,
    }
  }
  if (!decision.allowed) {
    headers ??= {}
    headers['retry-after'] = String(retryAfterSec(decision, nowMs))
  }
  let monthly: Admission['monthly'] = null
  const charges = classification.charges
  for (let i = 0; i < charges.length; i++) {
    if (charges[i]!.kind !== 'monthly') continue
    const w = decision.windows[i]!
    monthly = { team: charges[i]!.team!, used: w.used, quota: w.limit, refused: w.retryAtMs !== 0 }
  }
  return {
    classification,
    clientIp,
    decision,
    window: hv,
    headers,
    overLimit: !decision.allowed,
    monthly,
  }
}
