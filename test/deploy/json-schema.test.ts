import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseConfig } from '../../src/config/load.js'
import { fileURLToPath } from 'node:url'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { describe, expect, it } from 'vitest'
import YAML from 'yaml'
import { limitsJsonSchema } from '../../src/config/json-schema.js'
import { limitsFileSchema } from '../../src/config/schema.js'

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url))
const committed = JSON.parse(readFileSync(root('schema/limits.schema.json'), 'utf8'))

// Strict mode: the schema itself is valid JSON Schema that strict validators accept.
const ajv = new Ajv2020({ strict: true, allErrors: true })
const validate = ajv.compile(committed)

describe('schema/limits.schema.json', () => {
  it('is what the code schema generates (run `npm run schema` after changing it)', () => {
    expect(committed).toEqual(JSON.parse(JSON.stringify(limitsJsonSchema())))
  })

  it('limits.yaml points editors at it', () => {
    expect(readFileSync(root('limits.yaml'), 'utf8').split('\n')[0]).toBe(
      '# yaml-language-server: $schema=./schema/limits.schema.json'
    )
  })


  it('shows the defaults', () => {
    expect(committed.properties.listen.properties.port.default).toBe(8080)
    expect(committed.properties.store.properties.timeout_ms.default).toBe(100)
    expect(committed.properties.history.properties.removed.default).toBe('gone')
  })

  // The same verdict from the editor's JSON Schema and from the code's schema.
  it.each([
    ['the empty file', ''],
    ['the shipped limits.yaml, as written (${…} and all)', readFileSync(root('limits.yaml'), 'utf8')],
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
    const code = parseConfig(text || '{}', {})
    expect(code.ok, JSON.stringify(code.ok ? '' : code.problems)).toBe(true)
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

// Issue #12: every fixture through the editor's schema and through basegate; where they
// disagree it must be a rule JSON Schema cannot say, named here.
const CODE_ONLY: [RegExp, string][] = [
  [/^admin\.host$/, 'a non-loopback admin host needs a token (needs a loopback test on an address)'],
  [/^admin\.port$/, 'the admin port is not the proxy port (compares two fields' + "'" + ' values)'],
  [/^monthly\.teams\[\d+\]\.plan$/, 'a team' + "'" + 's plan must be a plan of the file (a lookup)'],
  [/^monthly\.teams\[\d+\]\.id$/, 'team ids are unique (uniqueness of one field)'],
  [/^monthly\.timezone$/, 'an IANA time zone (a lookup)'],
  [/^rate_limits\.rules\[\d+\]\.name$/, 'rule names are unique (uniqueness of one field)'],
  [/^rate_limits\.rules\[\d+\]\.path$/, '* only at the end of a rule path'],
  [/^client_ip\.trusted_proxies\[\d+\]$/, 'an IP address or CIDR (ranges of numbers)'],
  [/^allow\.clients\[\d+\]$/, 'an IP address or CIDR (ranges of numbers)'],
  [/^(store\.url|upstream\.url)$/, 'a variable that is not set (the environment)'],
]

describe('the schema and basegate agree on every fixture', () => {
  const dir = root('test/fixtures/config')
  const files = readdirSync(dir).filter((f) => f.endsWith('.yaml') && f !== 'bad-yaml.yaml')
  it.each(files)('%s', async (file) => {
    const text = readFileSync(join(dir, file), 'utf8')
    const schemaOk = validate(YAML.parse(text) ?? {}) as boolean
    const code = parseConfig(text, {})
    if (schemaOk === code.ok) return
    // Only the schema may be more lenient, and only on rules it cannot express.
    expect(schemaOk, `${file}: the schema refuses what basegate accepts`).toBe(true)
    if (code.ok) return
    for (const p of code.problems) {
      const reason = CODE_ONLY.find(([re]) => re.test(p.field))
      expect(reason, `${file}: ${p.field}: ${p.message} is not a code-only rule`).toBeDefined()
    }
  })
})
