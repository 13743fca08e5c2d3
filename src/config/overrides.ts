import type { Config, ConfigProblem } from '../types.js'

/** SPEC §1: flags that beat the file. */
export interface FlagOverrides {
  port?: number
  upstream?: string
  redis?: string
}

/** Validates the raw flag values; problems name the flag. */
export function parseFlagOverrides(flags: { port?: string; upstream?: string; redis?: string }): {
  overrides: FlagOverrides
  problems: ConfigProblem[]
} {
  const problems: ConfigProblem[] = []
  const overrides: FlagOverrides = {}
  if (flags.port !== undefined) {
    const n = Number(flags.port)
    if (!/^\d+$/.test(flags.port) || n > 65535)
      problems.push({ field: '--port', message: `${JSON.stringify(flags.port)} is not a port` })
    else overrides.port = n
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
  if (flags.upstream !== undefined && url('--upstream', flags.upstream, ['http:', 'https:']))
    overrides.upstream = flags.upstream
  if (flags.redis !== undefined && url('--redis', flags.redis, ['redis:', 'rediss:']))
    overrides.redis = flags.redis
  return { overrides, problems }
}

/** Cross-field checks that only hold once the flags are applied (SPEC §1: a flag beats the file). */
export function checkApplied(c: Config): ConfigProblem[] {
  if (c.admin.port !== 0 && c.admin.port === c.listen.port) {
    return [
      {
        field: 'admin.port',
        message: `${c.admin.port} is the proxy's port (listen.port or --port); the admin listener needs its own`,
      },
    ]
  }
  return []
}

export function applyOverrides(config: Config, o: FlagOverrides): Config {
  return {
    ...config,
    listen: o.port === undefined ? config.listen : { ...config.listen, port: o.port },
    upstream: o.upstream === undefined ? config.upstream : { ...config.upstream, url: o.upstream },
    store: o.redis === undefined ? config.store : { ...config.store, url: o.redis, cluster: [] },
  }
}
