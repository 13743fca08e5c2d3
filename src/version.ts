import { readFileSync } from 'node:fs'

/** package.json (one source for the version and `engines`), from the built dist/src/ or from src/ (tests). */
export function packageJson(): { version?: string; engines?: { node?: string } } {
  for (const up of ['../../package.json', '../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8'))
      if (pkg.name === 'basegate') return pkg
    } catch {
      // not there: the other place
    }
  }
  return {}
}

/** The package's version. */
export function version(): string {
  return packageJson().version ?? 'unknown'
}
