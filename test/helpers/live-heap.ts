import type { GatewayProcess } from './gateway-process.js'

// What a process holds, not what V8 has not yet given back: its heap after a full collection,
// asked over the inspector (the process started with NODE_OPTIONS=--inspect=127.0.0.1:0).
// RSS alone measures V8's growth policy: on Node 24 a 24 GiB machine gets 64 MB semi-spaces
// and an old generation that grows ahead of the garbage, so RSS rises with the call rate even
// when nothing is kept.

/** NODE_OPTIONS for a gateway whose live heap a test reads. */
export const INSPECTABLE = { NODE_OPTIONS: '--inspect=127.0.0.1:0' }

/** The heap in use (MB) after two full collections. */
export async function liveHeapMb(gw: GatewayProcess): Promise<number> {
  return (await liveMemory(gw)).heapMb
}

/**
 * After two full collections: the heap in use, and the memory of Buffers outside it (MB; a
 * large Buffer's bytes are not in the heap).
 */
export async function liveMemory(
  gw: GatewayProcess
): Promise<{ heapMb: number; arrayBuffersMb: number }> {
  const m = /ws:\/\/127\.0\.0\.1:\d+\/[0-9a-f-]+/.exec(gw.stderr())
  if (m === null) throw new Error(`no inspector address in: ${gw.stderr()}`)
  const ws = new WebSocket(m[0])
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve()
    ws.onerror = () => reject(new Error('inspector refused'))
  })
  let id = 0
  const pending = new Map<number, (r: Record<string, unknown>) => void>()
  ws.onmessage = (e) => {
    const msg = JSON.parse(String(e.data)) as { id?: number; result?: Record<string, unknown> }
    if (msg.id !== undefined) pending.get(msg.id)?.(msg.result ?? {})
  }
  const send = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve) => {
      pending.set(++id, resolve)
      ws.send(JSON.stringify({ id, method, params }))
    })
  try {
    await send('HeapProfiler.collectGarbage')
    await send('HeapProfiler.collectGarbage')
    const { usedSize } = (await send('Runtime.getHeapUsage')) as { usedSize: number }
    const { result } = (await send('Runtime.evaluate', {
      expression: 'process.memoryUsage().arrayBuffers',
    })) as { result: { value: number } }
    return { heapMb: usedSize / 2 ** 20, arrayBuffersMb: result.value / 2 ** 20 }
  } finally {
    ws.close()
  }
}
