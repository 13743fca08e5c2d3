import type { ChildProcess } from 'node:child_process'

// A test file that ends without stopping its processes (a timeout, an interrupted run, a
// failed assertion before the cleanup) must not leave gateways and redis-servers running on the
// machine. Vitest ends its workers with SIGTERM, which skips 'exit' handlers: on either, the
// children still alive are killed, and the signal then does what it would have done.
const children = new Set<ChildProcess>()

function reapAll(): void {
  for (const c of children) c.kill('SIGKILL')
  children.clear()
}

process.on('exit', reapAll)
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    reapAll()
    process.kill(process.pid, signal)
  })
}

/** Kill `child` with the test process if nothing stopped it before. */
export function reapWithTest<T extends ChildProcess>(child: T): T {
  children.add(child)
  child.once('exit', () => children.delete(child))
  return child
}
