// Server versions are major.minor (SERVICE.md numbers releases so); a patch is dropped.

/** `6.2.3` or `6.2` → `6.2`; null when the text is not a version. */
export function parseVersion(text: unknown): string | null {
  if (typeof text !== 'string') return null
  const m = /^\s*v?(\d{1,3})\.(\d{1,3})(?:\.\d+)?(?:[-+][0-9A-Za-z.-]*)?\s*$/.exec(text)
  return m ? `${Number(m[1])}.${Number(m[2])}` : null
}

/** Negative, zero or positive as a is older than, equal to or newer than b. */
export function compareVersions(a: string, b: string): number {
  const [am, an] = a.split('.').map(Number) as [number, number]
  const [bm, bn] = b.split('.').map(Number) as [number, number]
  return am !== bm ? am - bm : an - bn
}
