import type { IncomingMessage } from 'node:http'
import type { Readable } from 'node:stream'
import type { Snapshot } from '../config/snapshot.js'
import { sizeCheckFor, type BodyCheck } from './actions.js'
import { heldThenRest, type BufferBudget, type HeldBody } from './body-buffer.js'
import { checkSize, listRowsRefusal, type SizeRefusal } from './check.js'

// The size room's one door for the request path: after the gate admitted a call, check its
// action's size limit and hand back what to forward. The forwarder knows nothing of sizes.

export type SizedBody =
  /** Forward: `body` to send (undefined: the request streams), `broken` for a dry-run's log. */
  | {
      kind: 'forward'
      body: Readable | Iterable<Buffer> | AsyncIterable<Buffer> | undefined
      broken: SizeRefusal | null
      release: () => void
    }
  | { kind: 'refused'; refusal: SizeRefusal; release: () => void }
  | { kind: 'aborted' }
  | { kind: 'unavailable'; message: string }

export interface SizeDeps {
  budget: BufferBudget
  /** Told of every body held: whether it went to a file, and the bytes now held in memory. */
  onHeld?: (spilled: boolean, bufferedBytes: number) => void
  /** How many processes share size_limits.buffer_bytes (workers); each holds its share. */
  processes: number
  /** Where spilled bodies go; the OS's temporary directory by default. */
  tmpDir?: string
}

const NOTHING = () => {}
/** Most calls: no size check, the request streams (one shared answer, nothing allocated). */
const AS_IS: SizedBody = Object.freeze({
  kind: 'forward',
  body: undefined,
  broken: null,
  release: NOTHING,
}) as SizedBody

function releaser(deps: SizeDeps, body: HeldBody | null): () => void {
  if (body === null) return NOTHING
  deps.onHeld?.(body.spilled, deps.budget.used)
  return () => {
    void body.release().then(() => deps.onHeld?.(false, deps.budget.used))
  }
}

/**
 * SPEC §4 on an admitted call (a size-refused call has used its rate slot). Synchronous where
 * no body is read (no check, or the list's `limit` query), so most calls take no extra turn.
 */
export function sizedBody(
  deps: SizeDeps,
  req: IncomingMessage,
  snapshot: Snapshot,
  at: { path: string; query: string }
): SizedBody | Promise<SizedBody> {
  const check = sizeCheckFor(req.method ?? 'GET', at.path)
  if (check === null) return AS_IS
  if (check.counts === 'query') {
    const limit = snapshot.config.sizeLimits.listRows
    const broken = listRowsRefusal(at.query, limit)
    if (broken === null) return AS_IS
    if (snapshot.config.mode === 'enforce')
      return { kind: 'refused', refusal: broken, release: NOTHING }
    return { kind: 'forward', body: undefined, broken, release: NOTHING }
  }
  return bodySized(deps, req, snapshot, check)
}

async function bodySized(
  deps: SizeDeps,
  req: IncomingMessage,
  snapshot: Snapshot,
  check: BodyCheck
): Promise<SizedBody> {
  const limits = snapshot.config.sizeLimits
  const r = await checkSize(check, req, {
    limits,
    budget: deps.budget,
    bufferBytes: Math.floor(limits.bufferBytes / Math.max(1, deps.processes)),
    enforce: snapshot.config.mode === 'enforce',
    tmpDir: deps.tmpDir,
  })
  switch (r.kind) {
    case 'aborted':
    case 'unavailable':
      return r
    case 'refused':
      return { kind: 'refused', refusal: r.refusal, release: releaser(deps, r.body) }
    case 'pass': {
      const release = releaser(deps, r.body)
      if (r.body === null) return { kind: 'forward', body: undefined, broken: r.broken, release }
      const body = r.rest ? heldThenRest(r.body, req) : r.body.chunks()
      return { kind: 'forward', body, broken: r.broken, release }
    }
  }
}
