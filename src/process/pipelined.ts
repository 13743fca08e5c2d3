import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

// SPEC §4 "Slow and idle clients never take what others need", for HTTP/1.1 pipelining. Node's
// server starts every request it parses at once and queues the answers in order; reading stops
// only when written answers back up, which they never do while the first is unfinished. So one
// connection could start thousands of calls (200 connections of 2,000 pipelined GETs: 2.6 GiB,
// and another client's call waited 18 s). As nginx and HAProxy do, a connection's calls are
// served one at a time, in order: a request that arrives while an earlier answer on its
// connection is unfinished waits for it, and reading stops while one waits. Node has parsed what
// it read already (a 64 KiB read holds hundreds of requests), so past MAX_PIPELINED waiting the
// next is answered 503 in its turn and the connection closes, and past MAX_OVER more it closes
// at once.

/** Requests one connection may have waiting behind its call in progress. */
export const MAX_PIPELINED = 16
/** Requests past those, answered 503 in their turn; past this many the connection closes at once. */
export const MAX_OVER = 256

/** A connection's requests waiting for their turn, and those past MAX_PIPELINED. */
interface Line {
  waiting: number
  over: number
}
const lines = new WeakMap<Socket, Line>()

/**
 * For a request whose answer is queued behind an earlier one (Node gives it no socket yet):
 * `start` runs when the answers before it are done. Past MAX_PIPELINED waiting, `refuse` runs
 * instead (its answer closes the connection, so later ones never run). False when the
 * connection has MAX_OVER of those too: the caller closes it now.
 */
export function waitTurn(
  socket: Socket,
  res: ServerResponse,
  start: () => void,
  refuse: () => void
): boolean {
  let line = lines.get(socket)
  if (line === undefined) lines.set(socket, (line = { waiting: 0, over: 0 }))
  // Nothing more is read while requests wait: what Node parsed already is all there is.
  socket.pause()
  if (line.waiting >= MAX_PIPELINED) {
    if (++line.over > MAX_OVER) return false
    res.once('socket', refuse)
    return true
  }
  line.waiting++
  const turn = line
  // Node assigns the socket to the next answer once the one before it has finished.
  res.once('socket', () => {
    if (--turn.waiting === 0 && turn.over === 0) {
      lines.delete(socket)
      if (!socket.destroyed) socket.resume()
    }
    start()
  })
  return true
}
