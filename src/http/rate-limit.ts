import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { Clock } from '../clock.js'
import type { Snapshot } from './snapshot.js'
import { monthBounds } from '../quota/month.js'
import type { Classification, Decision, Windows } from '../types.js'
import type { Admission } from './call.js'
import { ietfFields, policyName } from './ietf-headers.js'
import {
  rateHeaderValues,
  retryAfterSec,
  shadowRulesOver,
  type RateHeaderValues,
} from './rate-headers.js'

/** The team month a decision charged (or refused), if any. */
function monthlyOf(c: Classification, d: Decision): Admission['monthly'] {
  for (let i = 0; i < c.charges.length; i++) {
    const ch = c.charges[i]!
    if (ch.kind !== 'monthly') continue
    const w = d.windows[i]!
    const used = w.unknown === true ? null : w.used
    return { team: ch.team, used, quota: w.limit, refused: w.retryAtMs !== 0 }
  }
  return null
}

/**
 * Classifies the request and charges its windows in one store call. Throws StoreError (or
 * rejects with it) only when the store failed and on_error is closed. Answered synchronously
 * when the store can decide without I/O (issue #26: a flood's refusals, the memory store).
 */
export function admit(
  snapshot: Snapshot,
  store: Windows,
  req: IncomingMessage,
  path: string,
  clock: Clock
): Admission | Promise<Admission> {
  const nowMs = clock.now()
  const { clientIp: resolver, classifier, allowClient } = snapshot
  const clientIp = resolver.clientIp(req.socket.remoteAddress, req.headers['x-forwarded-for'])
  const classified = classifier.classify(
    req.method ?? 'GET',
    path,
    resolver.keyOf(clientIp),
    nowMs,
    clientIp
  )
  // SPEC §2 allow.clients: never limited, never charged, no headers (the classifier's answer
  // stays as it gave it: an allowed client's gets a copy without its windows).
  const classification =
    classified.charges.length > 0 && allowClient(clientIp)
      ? { ...classified, charges: [], emitHeaders: false }
      : classified
  const charges = classification.charges
  if (charges.length === 0) {
    return {
      classification,
      clientIp,
      decision: null,
      window: null,
      headers: null,
      refused: null,
      shadowRules: [],
      policy: null,
      monthly: null,
      storeMs: null,
    }
  }
  const started = clock.monotonic()
  const decided = store.consume(charges, nowMs)
  if (!(decided instanceof Promise))
    return admissionOf(
      snapshot,
      classification,
      clientIp,
      decided,
      started,
      clock.monotonic() - started
    )
  return decided.then((d) =>
    admissionOf(snapshot, classification, clientIp, d, started, clock.monotonic() - started)
  )
}

/** What a decision makes of the call: its headers, its refusal, its month. */
function admissionOf(
  snapshot: Snapshot,
  classification: Classification,
  clientIp: string,
  decision: Decision,
  started: number,
  storeMs: number
): Admission {
  const { config } = snapshot
  const charges = classification.charges
  const window = rateHeaderValues(decision, charges)
  const monthly = monthlyOf(classification, decision)
  const headers = classification.emitHeaders ? rateHeaders(config, decision, charges, window) : null
  const refused = decision.allowed ? null : monthly?.refused ? 'monthly' : 'rate'
  // SPEC §4: retry-after goes on a real refusal only; dry-run forwards the call. It is the
  // latest retry time of the refusing windows, so never earlier than a refusing policy's `t`
  // in the IETF fields (SPEC §10: both are rounded up from the same times).
  let answer = headers
  if (refused !== null && config.mode === 'enforce') {
    // The call's own object, completed in place: no copy per refusal (the flood's path).
    answer = headers ?? {}
    answer['retry-after'] = String(retryAfterSec(decision, charges))
    // SPEC §4: a refusal is a bare 429.
    answer['content-length'] = 0
  }
  const shadowRules = shadowRulesOver(decision, charges)
  return {
    classification,
    clientIp,
    decision,
    window,
    headers: answer,
    refused,
    shadowRules,
    policy: refused === null ? null : refusingPolicy(decision, charges),
    monthly,
    storeMs,
    storeStartedMs: started,
  }
}

/** The first window that refused (never a dry-run rule), by its policy name. */
function refusingPolicy(d: Decision, charges: Classification['charges']): string | null {
  for (let i = 0; i < charges.length; i++) {
    const c = charges[i]!
    if (d.windows[i]!.retryAtMs !== 0 && !(c.kind === 'rule' && c.dryRun)) return policyName(c)
  }
  return null
}

/** The rate headers of `header_style` (SPEC §4, §10), or null when none applies. */
function rateHeaders(
  config: Snapshot['config'],
  decision: Decision,
  charges: Classification['charges'],
  window: RateHeaderValues | null
): OutgoingHttpHeaders | null {
  const style = config.headerStyle
  const headers: OutgoingHttpHeaders = {}
  if (style !== 'ietf' && window !== null) {
    headers['x-ratelimit-limit'] = window.limit
    headers['x-ratelimit-remaining'] = window.remaining
    headers['x-ratelimit-reset'] = window.resetSec
  }
  if (style !== 'x-ratelimit') {
    const tz = config.monthly.timezone
    const ietf = ietfFields(decision, charges, (endMs) => monthBounds(endMs - 1, tz).startMs)
    if (ietf !== null) Object.assign(headers, ietf)
  }
  for (const _ in headers) return headers
  return null
}
