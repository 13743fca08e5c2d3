import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { describe, expect, it } from 'vitest'
import YAML from 'yaml'
import { limitsJsonSchema } from '../../src/config/json-schema.js'
import { limitsFileSchema } from '../../src/config/schema.js'

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url))
const committed = JSON.parse(readFileSync(root('schema/limits.schema.json'), 'utf8'))

describe('schema/limits.schema.json', () => {
  it('is what the code schema generates (run `npm run schema` after changing it)', () => {
    expect(committed).toEqual(JSON.parse(JSON.stringify(limitsJsonSchema())))
  })

  it('limits.yaml points editors at it', () => {
    expect(readFileSync(root('limits.yaml'), 'utf8').split('\n')[0]).toBe(
      '# yaml-language-server: $schema=./schema/limits.schema.json'
    )
  })

  const ajv = new Ajv2020({ strict: false, allErrors: true })
  const validate = ajv.compile(committed)

  // The same verdict from the editor's JSON Schema and from the code's schema.
  it.each([
    ['the empty file', ''],
    [
      'the shipped defaults, expanded',
      readFileSync(root('limits.yaml'), 'utf8')
        .replace(/"\$\{[A-Z_]+:-([^}]*)\}"/g, '"$1"')
        .replace(/\$\{BASEGATE_ADMIN_PORT:-(\d+)\}/, '$1'),
    ],
    [
      'a cloud file with rules',
      'deployment: cloud\nrate_limits:\n  base: [100/min, 5000/hour]\n  rules:\n    - { name: list, method: [GET], path: "/x/{base_uuid}/rows/", limits: 10/S }\n  ip_ceiling: 9000/day',
    ],
    [
      'monthly teams',
      'monthly:\n  enabled: true\n  plans: { gold: { calls_per_user: 9 } }\n  teams: [ { id: a, plan: gold, users: 3, bases: [6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10] } ]',
    ],
  ])('accepts %s', (_name, text) => {
    const doc = YAML.parse(text) ?? {}
    expect(limitsFileSchema.safeParse(doc).success).toBe(true)
    expect(validate(doc), JSON.stringify(validate.errors)).toBe(true)
  })

  it.each([
    ['a bad rate', 'rate_limits: { base: 500/mn }'],
    ['a zero rate', 'rate_limits: { base: 0/min }'],
    ['a bad rate in a list', 'rate_limits: { account: [100/min, 1/fortnight] }'],
    ['an unknown key', 'rate_limit: { base: 500/min }'],
    ['an unknown nested key', 'store: { urll: redis://x }'],
    ['a bad enum', 'deployment: on-prem'],
    ['a port out of range', 'listen: { port: 70000 }'],
    ['a string for a number', 'upstream: { timeout_ms: soon }'],
    ['a rule without a path', 'rate_limits: { rules: [ { name: a, limits: 1/min } ] }'],
    ['a plan with both counts', 'monthly: { plans: { odd: { calls: 1, calls_per_user: 2 } } }'],
    ['a plan with neither count', 'monthly: { plans: { odd: {} } }'],
  ])('refuses %s', (_name, text) => {
    const doc = YAML.parse(text)
    expect(limitsFileSchema.safeParse(doc).success).toBe(false)
    expect(validate(doc)).toBe(false)
  })
})
