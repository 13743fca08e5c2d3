import { storeKindOf } from '../limiter/redis-client.js'
import type { Config } from '../types.js'

// What the CLI reports (`basegate upgrade-report`, `basegate tune-report`) share: where the
// running instance's admin API is asked, and the last word when neither it nor the store answered.

/** The admin listener as this host reaches it (a wildcard bind is asked on loopback). */
export function adminUrl(config: Config): string {
  const h = config.admin.host
  const host = h === '0.0.0.0' ? '127.0.0.1' : h === '::' ? '::1' : h
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.admin.port}`
}

/** Neither the admin API (`answered`: what it said) nor the store gave a report: say why, exit 2. */
export function exitNoReport(config: Config, answered: string, what: string): never {
  const store =
    storeKindOf(config.store) === 'memory'
      ? `in-memory (${what} lives in the running process)`
      : 'out of reach'
  process.stderr.write(
    `no report: the admin API at ${adminUrl(config)} ${answered}, and the store is ${store}\n`
  )
  process.exit(2)
}
