import type { OutgoingHttpHeaders } from 'node:http'
import { compilePathPattern } from '../request/path-pattern.js'
import { memo2 } from '../request/memo.js'
import { pathPattern } from '../request/path-tokens.js'
import { ENTRIES, RELEASES, type HistoryEntry, type Recognise, type Release } from './table.js'
import { compareVersions } from './version.js'

// SPEC §8, compiled once from the tables: which entries a request matches, and what that
// means on a server of a given version. Pure; the request path reads it per call.

interface CompiledRecognise {
  entry: HistoryEntry
  /** Lower-case literal start of the pattern: a cheap filter before the regex. */
  prefix: string
  methods: ReadonlySet<string> | null
  re: RegExp
  anyQuery: readonly string[] | null
  bodyWithout: string | null
}

function compileRecognise(entry: HistoryEntry, r: Recognise): CompiledRecognise {
  // The trailing `/` is optional in a match, so it is not part of the filter.
  const literal = r.path.split(/\{|\*/)[0]!.toLowerCase().replace(/\/$/, '')
  return {
    entry,
    prefix: literal,
    // SPEC §8: HEAD matches what GET matches.
    methods: r.methods
      ? new Set(r.methods.includes('GET') ? [...r.methods, 'HEAD'] : r.methods)
      : null,
    re: compilePathPattern(r.path, { token: true }),
    anyQuery: r.anyQuery ?? null,
    bodyWithout: r.bodyWithout ?? null,
  }
}

/** A request's match: the entry, and a body field whose absence it still depends on. */
export interface Match {
  entry: HistoryEntry
  bodyWithout: string | null
}

const NO_MATCHES: Match[] = []
const NO_CANDIDATES: CompiledRecognise[] = []

function hasQueryParam(query: string, names: readonly string[]): boolean {
  // Cheap first: most queries do not even contain the names.
  if (query.length < 2 || !names.some((n) => query.includes(n))) return false
  const params = new URLSearchParams(query.slice(1))
  return names.some((n) => params.has(n))
}

export interface HistoryIndex {
  readonly releases: readonly Release[]
  readonly entries: readonly HistoryEntry[]
  /** Entries the request matches by method, path and query (body conditions still open). */
  match(method: string, path: string, query: string): Match[]
  /** A release's date as Unix seconds at 00:00 UTC. */
  releaseSec(version: string): number | null
  releaseDate(version: string): string | null
}

export function compileHistory(
  entries: readonly HistoryEntry[] = ENTRIES,
  releases: readonly Release[] = RELEASES
): HistoryIndex {
  const compiled = entries.flatMap((e) => e.recognise.map((r) => compileRecognise(e, r)))
  const prefixes = [...new Set(compiled.map((c) => c.prefix))]
  const dates = new Map(releases.map((r) => [r.version, r.date]))
  /** The entries a method and path match, their query still to check (once per path). */
  const candidates = memo2(8192, (method: string, path: string): CompiledRecognise[] => {
    const lower = path.toLowerCase()
    // Most calls start with none of the patterns' literal prefixes.
    if (!prefixes.some((p) => lower.startsWith(p))) return NO_CANDIDATES
    return compiled.filter(
      (c) =>
        lower.startsWith(c.prefix) &&
        (c.methods === null || c.methods.has(method)) &&
        c.re.test(path)
    )
  })
  return {
    releases: [...releases].sort((a, b) => compareVersions(b.version, a.version)),
    entries,
    match(method, path, query) {
      const cs = candidates(method, path)
      if (cs.length === 0) return NO_MATCHES
      const out: Match[] = []
      for (const c of cs) {
        if (c.anyQuery !== null && !hasQueryParam(query, c.anyQuery)) continue
        if (!out.some((m) => m.entry === c.entry))
          out.push({ entry: c.entry, bodyWithout: c.bodyWithout })
      }
      return out.sort((a, b) => compareVersions(a.entry.version, b.entry.version))
    },
    releaseDate: (v) => dates.get(v) ?? null,
    releaseSec(v) {
      const d = dates.get(v)
      return d === undefined ? null : Date.parse(`${d}T00:00:00Z`) / 1000
    },
  }
}

export interface HistoryPolicy {
  removed: 'gone' | 'pass'
  deprecationHeaders: boolean
}

/** What a matched request means on this server. */
export interface HistoryDecision {
  /** Answer 410 with this message (the call is not forwarded). */
  gone: { entry: HistoryEntry; message: string } | null
  /** Deprecation / Link headers for the answer. */
  headers: OutgoingHttpHeaders | null
  /** Entries that break at a version later than the server's (any, when it is unknown): the upgrade report. */
  breaking: HistoryEntry[]
}

export const NO_HISTORY: HistoryDecision = Object.freeze({
  gone: null,
  headers: null,
  breaking: [],
}) as HistoryDecision

function goneMessage(method: string, path: string, e: HistoryEntry, date: string | null): string {
  const use = e.replacement ? `; use ${e.replacement}` : ''
  // SPEC §6: a token in the path is named by its pattern, never repeated.
  return `${method} ${pathPattern(path)} was removed in ${e.version}${date ? ` (${date})` : ''}: ${e.what}${use}`
}

/** The replacement as a URI for a Link header: the request's base filled in, no placeholder. */
function successor(replacement: string, uuid: string | null): string {
  const cut = replacement.replace(/\.\.\.$/, '')
  if (uuid !== null) return cut.replace('{base_uuid}', uuid)
  const at = cut.indexOf('{')
  return at === -1 ? cut : cut.slice(0, at)
}

/** SPEC §8 for matched entries, on a server of `server` (null: unknown). */
export function decide(
  index: HistoryIndex,
  matches: readonly HistoryEntry[],
  server: string | null,
  policy: HistoryPolicy,
  request: { method: string; path: string; uuid: string | null }
): HistoryDecision {
  if (matches.length === 0) return NO_HISTORY
  const breaking = matches.filter(
    (e) => e.kind !== 'deprecated' && (server === null || compareVersions(e.version, server) > 0)
  )
  if (server === null) return { gone: null, headers: null, breaking }
  const removed = matches.find(
    (e) => e.kind === 'removed' && compareVersions(e.version, server) <= 0
  )
  if (removed && policy.removed === 'gone') {
    const message = goneMessage(
      request.method,
      request.path,
      removed,
      index.releaseDate(removed.version)
    )
    return { gone: { entry: removed, message }, headers: null, breaking }
  }
  let headers: OutgoingHttpHeaders | null = null
  const deprecated = matches.find(
    (e) => e.kind === 'deprecated' && compareVersions(e.version, server) <= 0
  )
  if (deprecated && !removed && policy.deprecationHeaders) {
    const sec = index.releaseSec(deprecated.version)
    headers = {}
    if (sec !== null) headers['deprecation'] = `@${sec}`
    // RFC 8594: where the history names the release that removes it (an entry removing the
    // same endpoint, later than this server), that release's date.
    const removal = matches.find(
      (e) => e.kind === 'removed' && compareVersions(e.version, server) > 0
    )
    const sunsetSec = removal === undefined ? null : index.releaseSec(removal.version)
    if (sunsetSec !== null) headers['sunset'] = new Date(sunsetSec * 1000).toUTCString()
    if (deprecated.replacement)
      headers['link'] =
        `<${successor(deprecated.replacement, request.uuid)}>; rel="successor-version"`
  }
  return { gone: null, headers, breaking }
}

/** The API's change history, compiled once from its tables. */
export const HISTORY = compileHistory()
