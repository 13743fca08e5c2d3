import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { createSecureContext } from 'node:tls'
import { readFile } from 'node:fs/promises'
import YAML, {
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  Scalar,
  visit,
  type Document,
} from 'yaml'
import type { $ZodIssue } from 'zod/v4/core'
import type { Config, ConfigProblem } from '../types.js'
import { buildConfig, ruleWarnings } from './build.js'
import { SET_ASIDE } from '../overrides/schema.js'
import { limitsFileSchema } from './schema.js'
import { applyFlagsToDocument, type Flags } from './flags.js'

export type LoadResult =
  /**
   * `warnings`: what is valid but surely not meant (a rule that can never match); `reads`: the
   * environment variables the file's values read (a candidate is expanded with these only).
   */
  | { ok: true; config: Config; warnings: ConfigProblem[]; reads: readonly string[] }
  | { ok: false; problems: ConfigProblem[] }

/** Nodes that YAML aliases may add to a file once expanded (billion laughs stops here). */
export const MAX_ALIAS_NODES = 10_000
/** How deep a file's values may nest (aliases expanded). */
export const MAX_DEPTH = 100

/**
 * SPEC §11 "Reading a candidate": aliases that expand past MAX_ALIAS_NODES nodes, or nesting
 * past MAX_DEPTH levels, are refused before anything is expanded (yaml's own guard allows 100
 * alias uses, then throws, which was a 500). Each node's expanded size and height is worked out
 * once (an alias reuses its anchor's), so a billion laughs costs its own size, not a billion.
 */
function yamlBounds(doc: Document): ConfigProblem | null {
  const kids = (node: unknown): unknown[] => {
    const out: unknown[] = []
    if (isMap(node) || isSeq(node))
      for (const item of node.items) {
        if (isPair(item)) out.push(item.key, item.value)
        else out.push(item)
      }
    return out.filter((k) => k !== null && k !== undefined)
  }
  const memo = new Map<unknown, [size: number, height: number]>()
  const open = new Set<unknown>()
  let cycle = false
  let tooDeep = false
  /** A node's size and height with its aliases expanded (each worked out once). */
  const expanded = (node: unknown, depth = 1): [number, number] => {
    // Past the bound the answer is known: no deeper walk (nor a deeper stack).
    if (depth > MAX_DEPTH) {
      tooDeep = true
      return [1, 1]
    }
    if (isAlias(node)) {
      const source = node.resolve(doc)
      return source === undefined ? [1, 1] : expanded(source, depth)
    }
    const known = memo.get(node)
    if (known !== undefined) return known
    if (open.has(node)) {
      cycle = true
      return [1, 1]
    }
    open.add(node)
    let size = 1
    let height = 0
    for (const k of kids(node)) {
      const [s, h] = expanded(k, depth + 1)
      size += s
      if (h > height) height = h
    }
    open.delete(node)
    const r: [number, number] = [size, height + 1]
    memo.set(node, r)
    return r
  }
  /** The nodes as written (an alias is one). */
  const written = (node: unknown): number =>
    isAlias(node) ? 1 : kids(node).reduce((n: number, k) => n + written(k), 1)
  if (doc.contents === null) return null
  const [size] = expanded(doc.contents)
  if (tooDeep) return { field: '(top level)', message: `values nest past ${MAX_DEPTH} levels` }
  if (cycle) return { field: '(top level)', message: 'a YAML alias refers to itself' }
  const added = size - written(doc.contents)
  if (added > MAX_ALIAS_NODES)
    return {
      field: '(top level)',
      message: `YAML aliases expand past ${MAX_ALIAS_NODES} nodes (${added > 1e9 ? 'over a billion' : added}); write the values out`,
    }
  return null
}

/**
 * SPEC §11: no answer carries a value the environment gave. In a candidate's problems, every
 * expanded value is written back as the variable it came from.
 */
function unexpanded(
  problems: ConfigProblem[],
  expansions: ReadonlyMap<string, string>
): ConfigProblem[] {
  if (expansions.size === 0) return problems
  // Longest first, so a value that holds another is replaced whole.
  const pairs = [...expansions].sort((a, b) => b[1].length - a[1].length)
  return problems.map((p) => {
    let message = p.message
    for (const [name, value] of pairs) {
      if (value === '') continue
      message = message.replaceAll(JSON.stringify(value), `"\${${name}}"`)
      message = message.replaceAll(value, `\${${name}}`)
    }
    return { ...p, message }
  })
}

const VAR_RE = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/** `${VAR}` / `${VAR:-default}` in one string; `$$` is a literal `$`. Unset `${VAR}` is an error. */
export function expandVars(
  text: string,
  env: NodeJS.ProcessEnv,
  missing: (name: string) => void
): string {
  return text.replace(VAR_RE, (whole, name: string | undefined, fallback: string | undefined) => {
    if (whole === '$$') return '$'
    const value = env[name!]
    if (value !== undefined && value !== '') return value
    if (fallback !== undefined) return fallback
    if (value === undefined) missing(name!)
    return value ?? ''
  })
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = ''
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : (out ? '.' : '') + String(p)
  return out || '(top level)'
}

function describe(input: unknown): string {
  if (input === undefined) return 'nothing'
  if (input === null) return 'null'
  if (Array.isArray(input)) return 'a list'
  if (typeof input === 'object') return 'a mapping'
  return JSON.stringify(input)
}

/** One line per zod issue, naming the field the way the file spells it. */
export function issueToProblems(
  issue: $ZodIssue,
  base: readonly PropertyKey[] = []
): ConfigProblem[] {
  const path = [...base, ...issue.path]
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((k) => ({
        field: formatPath([...path, k]),
        message: UNKNOWN_KEY,
      }))
    case 'invalid_union': {
      // A union the schema words itself (workers: N or auto) says what it accepts.
      if (!issue.message.startsWith('Invalid'))
        return [{ field: formatPath(path), message: issue.message }]
      // Report the branch that matches the input's kind (a rate or a list of rates).
      const input = (issue as { input?: unknown }).input
      const branches = issue.errors
      const pick = branches.find((b) =>
        b.some((i) => (Array.isArray(input) ? i.path.length > 0 : i.path.length === 0))
      )
      const chosen = pick ?? branches[0] ?? []
      if (
        chosen.length === 0 ||
        (chosen[0]?.code === 'invalid_type' && !Array.isArray(input) && typeof input !== 'string')
      ) {
        return [
          {
            field: formatPath(path),
            message: `expected a rate or a list of rates, got ${describe(input)}`,
          },
        ]
      }
      return chosen.flatMap((i) => issueToProblems(i, path))
    }
    case 'invalid_type': {
      const input = (issue as { input?: unknown }).input
      if (input === undefined) return [{ field: formatPath(path), message: 'is required' }]
      return [
        { field: formatPath(path), message: `expected ${issue.expected}, got ${describe(input)}` },
      ]
    }
    case 'invalid_value':
      return [
        {
          field: formatPath(path),
          message: `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, got ${describe((issue as { input?: unknown }).input)}`,
        },
      ]
    case 'too_small':
      return [
        {
          field: formatPath(path),
          message: `must be at least ${String(issue.minimum)}, got ${describe((issue as { input?: unknown }).input)}`,
        },
      ]
    case 'too_big':
      return [
        {
          field: formatPath(path),
          message: `must be at most ${String(issue.maximum)}, got ${describe((issue as { input?: unknown }).input)}`,
        },
      ]
    case 'invalid_format':
      return [
        {
          field: formatPath(path),
          message: issue.message.startsWith('Invalid')
            ? `${describe((issue as { input?: unknown }).input)} is not in the expected form`
            : issue.message,
        },
      ]
    default:
      return [{ field: formatPath(path), message: issue.message }]
  }
}

/** Removes the value at `path` from a plain object tree (so the rest can still be checked). */
function dropPath(root: unknown, path: readonly PropertyKey[]): boolean {
  if (path.length === 0) return false
  let node = root as Record<PropertyKey, unknown> | null
  for (let i = 0; i < path.length - 1; i++) {
    const next = node?.[path[i]!]
    if (next === null || typeof next !== 'object') return false
    node = next as Record<PropertyKey, unknown>
  }
  if (node === null || typeof node !== 'object' || !(path.at(-1)! in node)) return false
  if (Array.isArray(node)) node.splice(Number(path.at(-1)), 1)
  else delete node[path.at(-1)!]
  return true
}

/**
 * Schema and cross-field checks in one pass: fields the schema refuses are reported, then
 * taken out, so the cross-field checks still run on the rest (SPEC §1: every problem at once).
 */
function validate(raw: unknown): { config?: Config; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = []
  for (let round = 0; round < 5; round++) {
    const parsed = limitsFileSchema.safeParse(raw, { reportInput: true })
    if (parsed.success) {
      const built = buildConfig(parsed.data)
      const seen = new Set(problems.map((p) => p.field))
      problems.push(...built.problems.filter((p) => !seen.has(p.field)))
      return problems.length === 0 && built.config
        ? { config: built.config, problems }
        : { problems }
    }
    let dropped = false
    for (const issue of parsed.error.issues) {
      problems.push(...issueToProblems(issue))
      // A broken rule is set aside whole (its problem named once): dropping only its bad field
      // would report the field as missing too, and splicing it out would renumber the rest.
      if (standInForRule(raw, issue.path)) {
        dropped = true
        continue
      }
      const keys =
        issue.code === 'unrecognized_keys'
          ? issue.keys.map((k) => [...issue.path, k])
          : [issue.path]
      for (const k of keys) dropped = dropPath(raw, k) || dropped
    }
    if (!dropped) break
  }
  return { problems: dedupe(problems) }
}

/**
 * A broken rule or override is set aside whole (its problems named once): in its place goes one
 * the schema accepts and the build skips (config/build.ts, overrides/build.ts).
 */
function standInForRule(raw: unknown, path: readonly PropertyKey[]): boolean {
  if (path[0] === 'overrides' && typeof path[1] === 'number') {
    const list = (raw as { overrides?: unknown[] }).overrides
    return standIn(list, path[1], { limits: { base: 'unlimited' } })
  }
  if (path[0] !== 'rate_limits' || path[1] !== 'rules' || typeof path[2] !== 'number') return false
  const rules = (raw as { rate_limits?: { rules?: unknown[] } }).rate_limits?.rules
  return standIn(rules, path[2], { path: '/', limits: 'unlimited' })
}

function standIn(list: unknown[] | undefined, i: number, shape: object): boolean {
  if (!Array.isArray(list) || list[i] === undefined) return false
  const item = { name: `${SET_ASIDE}${i}__`, ...shape }
  if (JSON.stringify(list[i]) === JSON.stringify(item)) return false
  list[i] = item
  return true
}

function dedupe(problems: ConfigProblem[]): ConfigProblem[] {
  const seen = new Set<string>()
  return problems.filter((p) => {
    const k = `${p.field}\n${p.message}`
    return seen.has(k) ? false : (seen.add(k), true)
  })
}

/**
 * Pure: limits.yaml text and an environment → Config or field-named problems, all at once.
 * `candidate` (SPEC §11, a file sent to be judged): the values the environment gave never
 * come back in a problem (each is written as its `${VAR}`).
 */
export function parseConfig(
  text: string,
  env: NodeJS.ProcessEnv = {},
  fileName = 'limits.yaml',
  flags: Flags = {},
  opts: { candidate?: boolean } = {}
): LoadResult {
  const lines = new LineCounter()
  const doc = YAML.parseDocument(text, { prettyErrors: true, uniqueKeys: true, lineCounter: lines })
  if (doc.errors.length > 0) {
    // The YAML itself is broken: nothing further can be read from it. Its first line says where
    // (the excerpt that followed its colon is left out).
    // Only the first is the slip: the parser's later errors follow from it (one unquoted
    // `{base_uuid}` made 183 lines of cascade), so they are counted, not listed.
    const first = doc.errors[0]!.message.split('\n')[0]!.replace(/:\s*$/, '')
    const more = doc.errors.length - 1
    const tail =
      more > 0
        ? ` (and ${more} more YAML error${more === 1 ? '' : 's'} after it, which may follow from this one)`
        : ''
    return { ok: false, problems: [{ field: fileName, message: first + tail }] }
  }
  const bound = yamlBounds(doc)
  if (bound !== null) return { ok: false, problems: [bound] }
  const problems: ConfigProblem[] = []
  /** The variables the file's values read (a comment naming one reads nothing: issue #41). */
  const read = new Set<string>()
  /** What each variable expanded to (a candidate's problems never say it). */
  const expansions = new Map<string, string>()
  // Expand inside string values only (never in comments), after parsing, so the error can
  // name the field. An unquoted value is re-read as YAML so `port: ${PORT:-8080}` is a number.
  visit(doc, {
    Scalar(_key, node, path) {
      if (typeof node.value !== 'string' || !node.value.includes('$')) return
      for (const m of node.value.matchAll(VAR_RE)) if (m[1] !== undefined) read.add(m[1])
      const field = formatPath(
        path.filter(YAML.isPair).map((p) => (isScalar(p.key) ? String(p.key.value) : '?'))
      )
      for (const m of node.value.matchAll(VAR_RE))
        if (m[1] !== undefined && env[m[1]] !== undefined) expansions.set(m[1], env[m[1]]!)
      const expanded = expandVars(node.value, env, (name) =>
        problems.push({
          field,
          message: `\${${name}} is not set (write \${${name}:-} for an empty default)`,
        })
      )
      node.value =
        node.type === Scalar.PLAIN ? YAML.parse(expanded === '' ? '""' : expanded) : expanded
    },
  })
  // A variable that is not set is reported, and its field checked no further. The aliases'
  // expansion was bounded above (yamlBounds), so yaml's own count is not needed.
  const raw = doc.toJS({ maxAliasCount: -1 }) ?? {}
  for (const p of problems) dropPath(raw, fieldPath(p.field))
  applyFlagsToDocument(raw, flags)
  const v = validate(raw)
  let all = inFileOrder(
    dedupe([...problems, ...v.problems]).map((p) => placeUnknownKey(p, doc, lines)),
    doc
  )
  if (opts.candidate === true) all = unexpanded(all, expansions)
  if (all.length > 0 || !v.config) return { ok: false, problems: all }
  const warnings = [...ruleWarnings(v.config), ...unchosenWarnings(read, doc, env, flags)]
  return { ok: true, config: v.config, warnings, reads: [...read] }
}

/**
 * The variables the shipped limits.yaml reads, and the setting each one fills. They are not
 * settings of their own: a file that does not write `${NAME}` ignores them (issue #34).
 */
export const SHIPPED_VARIABLES: readonly [name: string, setting: string][] = [
  ['BASEGATE_UPSTREAM', 'upstream.url'],
  ['REDIS_URL', 'store.url'],
  ['BASEGATE_ADMIN_TOKEN', 'admin.token'],
  ['BASEGATE_ADMIN_HOST', 'admin.host'],
  ['BASEGATE_ADMIN_PORT', 'admin.port'],
  ['BASEGATE_WORKERS', 'workers'],
]

/**
 * Issue #34: an operator must never run on a value they did not choose without a line saying
 * so: a shipped variable set in the environment that this file never reads, and a server
 * address left at its default.
 */
function unchosenWarnings(
  read: ReadonlySet<string>,
  doc: Document,
  env: NodeJS.ProcessEnv,
  flags: Flags
): ConfigProblem[] {
  const out: ConfigProblem[] = []
  for (const [name, setting] of SHIPPED_VARIABLES) {
    if (env[name] === undefined || env[name] === '' || read.has(name)) continue
    out.push({
      field: setting,
      message: `${name} is set in the environment, but this file does not read it (write ${setting.split('.').pop()}: "\${${name}}" under ${setting.includes('.') ? setting.split('.')[0] : 'the top level'} to use it); the file's value, or the default, applies`,
    })
  }
  if (flags.upstream === undefined && doc.getIn(['upstream', 'url']) === undefined)
    out.push({
      field: 'upstream.url',
      message:
        'is not set: calls go to the default http://127.0.0.1:8000 (set upstream.url, or --upstream)',
    })
  return out
}

/**
 * Problems in the order their fields stand in the file (issue #49: the schema's and the
 * cross-field checks' came in two runs); a problem with no place in the file (a flag, a
 * default) after them, in the order found.
 */
function inFileOrder(problems: ConfigProblem[], doc: Document): ConfigProblem[] {
  const at = (p: ConfigProblem): number => {
    const path = fieldPath(p.field)
    for (let n = path.length; n > 0; n--) {
      const node = doc.getIn(path.slice(0, n), true) as { range?: [number, number, number] } | null
      if (node?.range !== undefined) return node.range[0]
    }
    return Number.MAX_SAFE_INTEGER
  }
  return problems
    .map((p, i) => ({ p, i, at: at(p) }))
    .sort((a, b) => a.at - b.at || a.i - b.i)
    .map((x) => x.p)
}

const UNKNOWN_KEY = 'is not a known key'

/**
 * An unknown key says where it is and what it may have meant (issue #34): its line, and the
 * known key of that level nearest to it (`rate_limit` → `rate_limits`).
 */
function placeUnknownKey(p: ConfigProblem, doc: Document, lines: LineCounter): ConfigProblem {
  if (p.message !== UNKNOWN_KEY) return p
  const path = fieldPath(p.field)
  const key = String(path.at(-1))
  const parent = path.length === 1 ? doc.contents : doc.getIn(path.slice(0, -1), true)
  const pair = isMap(parent)
    ? parent.items.find((i) => isScalar(i.key) && String(i.key.value) === key)
    : undefined
  const at = (pair?.key as { range?: [number, number, number] } | undefined)?.range?.[0]
  const where = at === undefined ? [] : [`line ${lines.linePos(at).line}`]
  const near = nearest(key, knownKeysAt(path.slice(0, -1)))
  if (near !== null) where.push(`did you mean ${near}?`)
  return where.length === 0 ? p : { ...p, message: `${UNKNOWN_KEY} (${where.join('; ')})` }
}

/** The keys the schema knows at a path of the file (none where it is not a mapping). */
function knownKeysAt(path: readonly PropertyKey[]): string[] {
  type Node = { shape?: Record<string, unknown>; _zod?: { def?: Record<string, unknown> } }
  const unwrap = (n: Node | undefined): Node | undefined => {
    let x = n
    while (x?._zod?.def?.innerType !== undefined) x = x._zod.def.innerType as Node
    return x
  }
  let node: Node | undefined = limitsFileSchema as unknown as Node
  for (const p of path) {
    node = unwrap(node)
    node =
      typeof p === 'number'
        ? (node?._zod?.def?.element as Node | undefined)
        : (node?.shape?.[String(p)] as Node | undefined)
  }
  const shape = unwrap(node)?.shape
  return shape === undefined ? [] : Object.keys(shape)
}

/** The known key closest to `key` by edit distance, when it is close enough to be a typo. */
function nearest(key: string, known: readonly string[]): string | null {
  let best: string | null = null
  let bestD = Math.max(2, Math.floor(key.length / 3)) + 1
  for (const k of known) {
    const d = editDistance(key.toLowerCase(), k)
    if (d < bestD) [best, bestD] = [k, d]
  }
  return best
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(
        prev[j]! + 1,
        cur[j - 1]! + 1,
        prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)
      )
    prev = cur
  }
  return prev[b.length]!
}

/** `a.b[2].c` → ['a', 'b', 2, 'c']. */
function fieldPath(field: string): PropertyKey[] {
  const out: PropertyKey[] = []
  for (const m of field.matchAll(/([^.[\]]+)|\[(\d+)\]/g))
    out.push(m[2] !== undefined ? Number(m[2]) : m[1]!)
  return out
}

export async function loadConfigFile(
  file: string,
  env: NodeJS.ProcessEnv = {},
  flags: Flags = {}
): Promise<LoadResult> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (err) {
    return {
      ok: false,
      problems: [
        {
          field: file,
          message: `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
        },
      ],
    }
  }
  // Issue #11: editors truncate before they write; an empty file is a half-written one, not
  // "every default" (write `{}` for that). It is refused at start and on reload alike.
  if (YAML.parseDocument(text).contents === null) {
    return {
      ok: false,
      problems: [{ field: file, message: 'is empty (write {} to take every default)' }],
    }
  }
  return withUsableTls(parseConfig(text, env, file, flags), file)
}

/**
 * listen.tls (issues #25, #34): relative paths are the config file's folder's, as an operator
 * reads them beside the file; each file must be readable, a PEM the TLS stack accepts, and the
 * key must be the certificate's. Each problem names the field and the resolved path, so `check`
 * refuses what the start would (exit 2, no stack trace, no restart loop under systemd).
 */
function withUsableTls(r: LoadResult, file: string): LoadResult {
  if (!r.ok || r.config.listen.tls === null) return r
  const dir = dirname(resolve(file))
  const certFile = resolve(dir, r.config.listen.tls.certFile)
  const keyFile = resolve(dir, r.config.listen.tls.keyFile)
  const problems: ConfigProblem[] = []
  const read = (field: string, path: string): Buffer | null => {
    try {
      return readFileSync(path)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err)
      problems.push({ field, message: `${JSON.stringify(path)} cannot be read (${code})` })
      return null
    }
  }
  const cert = read('listen.tls.cert_file', certFile)
  const key = read('listen.tls.key_file', keyFile)
  if (cert !== null && key !== null) problems.push(...tlsProblems(cert, certFile, key, keyFile))
  if (problems.length > 0) return { ok: false, problems }
  r.config.listen.tls = { certFile, keyFile }
  return r
}

/** What the TLS stack says of a certificate and its key, each said of its own field. */
function tlsProblems(
  cert: Buffer,
  certFile: string,
  key: Buffer,
  keyFile: string
): ConfigProblem[] {
  const reason = (err: unknown) => String((err as Error).message).replace(/^error:[0-9A-F]+:/, '')
  try {
    createSecureContext({ cert })
  } catch (err) {
    return [
      {
        field: 'listen.tls.cert_file',
        message: `${JSON.stringify(certFile)} is not a PEM certificate (${reason(err)})`,
      },
    ]
  }
  try {
    createSecureContext({ key })
  } catch (err) {
    return [
      {
        field: 'listen.tls.key_file',
        message: `${JSON.stringify(keyFile)} is not a PEM private key (${reason(err)})`,
      },
    ]
  }
  try {
    createSecureContext({ cert, key })
  } catch (err) {
    return [
      {
        field: 'listen.tls.key_file',
        message: `${JSON.stringify(keyFile)} is not the key of the certificate in listen.tls.cert_file (${reason(err)})`,
      },
    ]
  }
  return []
}

export function formatProblems(problems: readonly ConfigProblem[]): string {
  return problems.map((p) => `${p.field}: ${p.message}`).join('\n')
}
