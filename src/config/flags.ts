import type { ConfigProblem } from '../types.js'

/** SPEC §1: flags that beat the file. */
export interface Flags {
  port?: number
  upstream?: string
  redis?: string
}

/** Validates the raw flag values; problems name the flag. */
export function parseFlags(raw: { port?: string; upstream?: string; redis?: string }): {
  flags: Flags
  problems: ConfigProblem[]
} {
  const problems: ConfigProblem[] = []
  const flags: Flags = {}
  if (raw.port !== undefined) {
    const n = Number(raw.port)
    if (!/^\d+$/.test(raw.port) || n > 65535)
      problems.push({ field: '--port', message: `${JSON.stringify(raw.port)} is not a port` })
    else flags.port = n
  }
  const url = (name: string, value: string, schemes: string[]): boolean => {
    try {
      if (schemes.includes(new URL(value).protocol)) return true
    } catch {
      /* reported below */
    }
    problems.push({
      field: name,
      message: `${JSON.stringify(value)} is not a ${schemes.join(' or ')} URL`,
    })
    return false
  }
  if (raw.upstream !== undefined && url('--upstream', raw.upstream, ['http:', 'https:']))
    flags.upstream = raw.upstream
  if (raw.redis !== undefined && url('--redis', raw.redis, ['redis:', 'rediss:']))
    flags.redis = raw.redis
  return { flags, problems }
}

/**
 * Puts the flags into the parsed document before it is validated, so every check (the admin
 * port against the proxy's, a URL's scheme) sees the values that will run, and a flag beats
 * the file at start and on every reload alike.
 */
export function applyFlagsToDocument(raw: unknown, o: Flags): void {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return
  const doc = raw as Record<string, Record<string, unknown> | undefined>
  const section = (k: string): Record<string, unknown> => {
    const v = doc[k]
    if (v === null || typeof v !== 'object' || Array.isArray(v)) doc[k] = {}
    return doc[k]!
  }
  if (o.port !== undefined) section('listen').port = o.port
  if (o.upstream !== undefined) section('upstream').url = o.upstream
  if (o.redis !== undefined) Object.assign(section('store'), { url: o.redis, cluster: [] })
}
