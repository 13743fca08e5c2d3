import { packageJson } from './version.js'

// Issue #41: /usr/bin/node on Debian 12 is Node 18, below what basegate is tested on. A start
// on a Node below package.json's `engines` says so in one line and exits 2, before anything
// else loads.

/** The lowest Node version `engines.node` (">=X.Y.Z") admits. */
export function minimumNode(): string {
  const pkg = packageJson()
  return /^>=\s*(\d+(?:\.\d+){0,2})$/.exec(pkg.engines?.node?.trim() ?? '')?.[1] ?? '0'
}

/** Whether version `a` (X.Y.Z) is below `b`. */
export function below(a: string, b: string): boolean {
  const x = a.split('.').map(Number)
  const y = b.split('.').map(Number)
  for (let i = 0; i < 3; i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0)
  }
  return false
}

/** The line to exit with on a Node too old, or null. */
export function nodeProblem(running: string, minimum = minimumNode()): string | null {
  if (!below(running, minimum)) return null
  return `basegate needs Node.js ${minimum} or later; this is ${running} (${process.execPath}). Install Node ${minimum.split('.')[0]} (the image runs it; see the README's "Running it").`
}
