import { describe, expect, it } from 'vitest'
import { JsonArrayCounter, JsonSyntaxError } from '../../src/http/json-array-count.js'

function rng(seed: number) {
  return () => (seed = (seed * 48271) % 2147483647) / 2147483647
}

/** Random JSON-ish text: valid values, with a share of small corruptions. */
function generate(r: () => number, depth = 0): string {
  const k = r()
  if (depth > 3 || k < 0.3) {
    return ['1', '-0.5e3', 'true', 'null', '"a\\"b"', '"\\u0041"', '"é"', '0', '12'][
      Math.floor(r() * 9)
    ]!
  }
  if (k < 0.6) {
    const n = Math.floor(r() * 4)
    return `[${Array.from({ length: n }, () => generate(r, depth + 1)).join(',')}]`
  }
  const n = Math.floor(r() * 4)
  const keys = ['rows', 'x', '\\u0072ows', 'table_name']
  return `{${Array.from({ length: n }, () => `"${keys[Math.floor(r() * 4)]}":${generate(r, depth + 1)}`).join(',')}}`
}

function corrupt(r: () => number, text: string): string {
  const i = Math.floor(r() * (text.length + 1))
  const junk = [',', ']', '}', '"', 'x', '01', ' ', ':', '\\', '\u0001'][Math.floor(r() * 10)]!
  return r() < 0.5 ? text.slice(0, i) + junk + text.slice(i) : text.slice(0, i) + text.slice(i + 1)
}

/** What JSON.parse says the count is (last duplicate key wins, as the server reads it). */
function viaParse(text: string): string {
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch {
    return 'invalid'
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return 'not_object'
  if (!('rows' in v)) return 'missing'
  const rows = (v as { rows: unknown }).rows
  return Array.isArray(rows) ? `count:${rows.length}` : 'not_array'
}

function viaScanner(text: string, chunk: number): string {
  const c = new JsonArrayCounter('rows')
  const buf = Buffer.from(text)
  try {
    for (let i = 0; i < buf.length; i += chunk) c.write(buf.subarray(i, i + chunk))
    const r = c.end()
    return r.kind === 'count' ? `count:${r.count}` : r.kind
  } catch (err) {
    if (err instanceof JsonSyntaxError) return 'invalid'
    throw err
  }
}

describe('JsonArrayCounter: fuzzed against JSON.parse', () => {
  it('agrees on 5,000 generated bodies, split into random chunk sizes', () => {
    const r = rng(42)
    for (let i = 0; i < 5000; i++) {
      let text = `{"table_name":"T","rows":${generate(r)}}`
      if (r() < 0.3) text = generate(r)
      if (r() < 0.4) text = corrupt(r, text)
      const chunk = 1 + Math.floor(r() * 7)
      expect(viaScanner(text, chunk), text).toBe(viaParse(text))
    }
  })

  it('the last of duplicate keys counts', () => {
    expect(viaScanner('{"rows":[1,2,3],"rows":[1]}', 3)).toBe('count:1')
    expect(viaScanner('{"rows":[1],"rows":[1,2,3]}', 3)).toBe('count:3')
  })

  it('keeps memory bounded by depth: a 4 MiB body of 200k rows scans without holding it', () => {
    const c = new JsonArrayCounter('rows')
    c.write(Buffer.from('{"rows":['))
    const row = Buffer.from('{"Name":"row","n":[1,2,3]},')
    for (let i = 0; i < 200_000; i++) c.write(row)
    c.write(Buffer.from('{}]}'))
    expect(c.end()).toEqual({ kind: 'count', count: 200_001 })
  })
})
