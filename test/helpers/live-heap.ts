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
  const ins = await inspect(gw)
  try {
    await ins.send('HeapProfiler.collectGarbage')
    await ins.send('HeapProfiler.collectGarbage')
    const { usedSize } = (await ins.send('Runtime.getHeapUsage')) as { usedSize: number }
    const arrayBuffers = (await ins.evaluate('process.memoryUsage().arrayBuffers')) as number
    return { heapMb: usedSize / 2 ** 20, arrayBuffersMb: arrayBuffers / 2 ** 20 }
  } finally {
    ins.close()
  }
}

/**
 * The bytes the process allocates on V8's heap while `work` runs (SPEC §12: what a call
 * allocates, counted, not timed). V8's GC profiler gives the heap in use before and after each
 * collection; what was allocated is every rise between them: the heap at each collection's
 * start less the heap after the one before, and at the end the heap now less the heap after
 * the last. Nothing is sampled, so the same calls give the same count within a few per cent
 * once the code is compiled (a run's timers add their own little).
 */
export async function allocatedBytes(
  gw: GatewayProcess,
  work: () => Promise<void>
): Promise<number> {
  const ins = await inspect(gw)
  try {
    await ins.evaluate(`(() => {
      const v8 = process.getBuiltinModule('v8')
      const p = new v8.GCProfiler()
      globalThis.__allocationCount = { p, before: v8.getHeapStatistics().used_heap_size }
      p.start()
      return 0
    })()`)
    await work()
    return (await ins.evaluate(`(() => {
      const v8 = process.getBuiltinModule('v8')
      const { p, before } = globalThis.__allocationCount
      const now = v8.getHeapStatistics().used_heap_size
      let sum = 0
      let after = before
      for (const s of p.stop().statistics) {
        sum += s.beforeGC.heapStatistics.usedHeapSize - after
        after = s.afterGC.heapStatistics.usedHeapSize
      }
      delete globalThis.__allocationCount
      return sum + now - after
    })()`)) as number
  } finally {
    ins.close()
  }
}

/** The process's inspector (it started with INSPECTABLE): protocol calls and evaluations. */
async function inspect(gw: GatewayProcess) {
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
  const evaluate = async (expression: string): Promise<unknown> => {
    const r = (await send('Runtime.evaluate', { expression, returnByValue: true })) as {
      result: { value?: unknown }
      exceptionDetails?: { text: string; exception?: { description?: string } }
    }
    if (r.exceptionDetails !== undefined)
      throw new Error(r.exceptionDetails.exception?.description ?? r.exceptionDetails.text)
    return r.result.value
  }
  return { send, evaluate, close: () => ws.close() }
}
