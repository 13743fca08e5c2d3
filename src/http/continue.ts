import type { IncomingMessage, ServerResponse } from 'node:http'

// SPEC §4: `Expect: 100-continue` is answered `100 Continue` only after every check the head
// allows. Node's server answers it at once unless a 'checkContinue' listener takes the request;
// this one marks it, and the request path says when the body may come. A call answered without
// the 100 (a refusal of any kind) closes its connection: the client may or may not send the
// body it held back, and a body that arrives unread must not be read as the next request.

/** The requests waiting for their 100, with the keep-alive their response would have had. */
const WAITING = new WeakMap<IncomingMessage, boolean>()

/** A request that asked for 100 Continue: nothing is sent yet, and its answer closes unless continued. */
export function holdContinue(req: IncomingMessage, res: ServerResponse): void {
  WAITING.set(req, res.shouldKeepAlive)
  res.shouldKeepAlive = false
}

/** The body may come: 100 Continue, once, for a request that asked for it. */
export function sendContinue(req: IncomingMessage, res: ServerResponse): void {
  const keepAlive = WAITING.get(req)
  if (keepAlive === undefined) return
  WAITING.delete(req)
  res.shouldKeepAlive = keepAlive
  if (!res.headersSent) res.writeContinue()
}
