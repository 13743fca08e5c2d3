import { z } from 'zod'
import { UUID_PATTERN } from '../request/base-uuid.js'
import { DEFAULTS } from './defaults.js'
import { limitsFileSchema, planSchema } from './schema.js'

/** `${VAR}` / `${VAR:-default}` written where a number or a boolean goes (expanded before validation). */
const ENV_REF = {
  type: 'string',
  pattern: '^\\$\\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\\}$',
  description: 'an environment variable, expanded at load',
}

type Node = Record<string, unknown>

/** Walks the schema and the defaults together: each leaf default lands on its property. */
function addDefaults(node: Node, defaults: unknown): void {
  if (defaults === null || typeof defaults !== 'object' || Array.isArray(defaults)) {
    node.default = defaults
    return
  }
  const props = node.properties as Record<string, Node> | undefined
  if (!props) return
  for (const [k, v] of Object.entries(defaults)) if (props[k]) addDefaults(props[k]!, v)
}

/** JSON Schema that strict validators accept, and that the file as shipped (with `${…}`) passes. */
function tidy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(tidy)
  if (node === null || typeof node !== 'object') return node
  const out: Node = {}
  for (const [k, v] of Object.entries(node as Node)) out[k] = tidy(v)
  // zod marks startsWith() with a format no validator knows; its pattern says the same.
  if (out.format === 'starts_with') delete out.format
  if (out.type === 'integer' || out.type === 'number' || out.type === 'boolean') {
    const { description, default: dflt, ...typed } = out
    return {
      anyOf: [typed, ENV_REF],
      ...(description ? { description } : {}),
      ...(dflt !== undefined ? { default: dflt } : {}),
    }
  }
  return out
}

const UUID = `^${UUID_PATTERN}$`

/** Cross-field and format rules JSON Schema can say, by path (the code checks them too). */
const PATTERNS: [path: string[], pattern: string][] = [
  [['upstream', 'url'], '^(https?://|\\$\\{)'],
  [['store', 'url'], '^($|rediss?://|\\$\\{)'],
  [['store', 'cluster', '[]'], '^(rediss?://|\\$\\{)'],
  [['allow', 'bases', '[]'], UUID],
  [['monthly', 'teams', '[]', 'bases', '[]'], UUID],
]

function at(node: Node, path: string[]): Node | null {
  let cur: Node | undefined = node
  for (const k of path) {
    cur =
      k === '[]'
        ? (cur?.items as Node | undefined)
        : (cur?.properties as Record<string, Node> | undefined)?.[k]
    if (!cur) return null
  }
  return cur
}

/**
 * limits.yaml as JSON Schema, generated from the schema the code validates with, so an
 * editor completes and checks the file with the same rules, and shows the defaults. What JSON
 * Schema cannot say (a public admin host needs a token, a team's plan must exist, the admin
 * port is not the proxy's) stays in code and in basegate check.
 */
export function limitsJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(limitsFileSchema, {
    io: 'input',
    unrepresentable: 'any',
    override: (ctx) => {
      // The code's refine ("exactly one of calls or calls_per_user"), said in JSON Schema.
      if (ctx.zodSchema === planSchema)
        ctx.jsonSchema.oneOf = ['calls', 'calls_per_user'].map((k) => ({
          type: 'object',
          properties: { [k]: true },
          required: [k],
        }))
    },
  }) as Node
  addDefaults(schema, DEFAULTS)
  for (const [path, pattern] of PATTERNS) {
    const n = at(schema, path)
    if (n) n.pattern = pattern
  }
  return {
    ...(tidy(schema) as Node),
    $id: 'https://basegate.dev/schema/limits.schema.json',
    title: 'basegate limits.yaml',
    description:
      'The one configuration file of basegate, a rate-limiting reverse proxy for a self-hosted SeaTable server.',
  }
}
