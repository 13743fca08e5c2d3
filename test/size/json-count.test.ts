import { describe, expect, it } from 'vitest'
import { rng } from '../helpers/rng.js'
import {
  arrayElement,
  foldKey,
  JsonBodyScanner,
  JsonSyntaxError,
  MAX_DEPTH,
} from '../../src/size/json-count.js'

/** Random JSON-ish text: valid values, with a share of small corruptions. */
function generate(r: () => number, depth = 0): string {
  const k = r()
  if (depth > 3 || k < 0.3) {
    const leaves = [
      '1',
      '-0.5e3',
      'true',
      'null',
      '"a\\"b"',
      '"\\u0041"',
      '"é"',
      '0',
      '12',
      'false',
      '345',
      '"row 7"',
      // A row as clients send them: the scanner reads `"k":"`, `,"`, `,{"` and `}` in one go.
      '{"Name":"row 1","Count":12,"Done":false}',
      '{"Name": "row 2" , "Count" :0,"Done":true }',
    ]
    return leaves[Math.floor(r() * leaves.length)]!
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
  const c = new JsonBodyScanner({ count: 'rows' })
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

describe('JsonBodyScanner: fuzzed against JSON.parse', () => {
  it('agrees on 20,000 generated bodies, split into random chunk sizes', () => {
    const r = rng(42)
    for (let i = 0; i < 20_000; i++) {
      let text = `{"table_name":"T","rows":${generate(r)}}`
      if (r() < 0.3) text = generate(r)
      if (r() < 0.4) text = corrupt(r, text)
      // Small chunks put a chunk's end inside every token; large ones let the scanner read
      // several bytes a turn.
      const chunk = r() < 0.5 ? 1 + Math.floor(r() * 7) : 8 + Math.floor(r() * 400)
      expect(viaScanner(text, chunk), text).toBe(viaParse(text))
    }
  })

  it('the last of duplicate keys counts', () => {
    expect(viaScanner('{"rows":[1,2,3],"rows":[1]}', 3)).toBe('count:1')
    expect(viaScanner('{"rows":[1],"rows":[1,2,3]}', 3)).toBe('count:3')
  })

  it('keeps memory bounded by depth: a 4 MiB body of 200k rows scans without holding it', () => {
    const c = new JsonBodyScanner({ count: 'rows' })
    c.write(Buffer.from('{"rows":['))
    const row = Buffer.from('{"Name":"row","n":[1,2,3]},')
    for (let i = 0; i < 200_000; i++) c.write(row)
    c.write(Buffer.from('{}]}'))
    expect(c.end()).toEqual({ kind: 'count', count: 200_001 })
  })
})

describe('JsonBodyScanner: rows read whole in one pass (issue #47)', () => {
  /** A row's value: every scalar shape JSON has, valid and not, and nesting past the reader's depth. */
  function rowValue(r: () => number, depth: number): string {
    const k = r()
    if (depth < 10 && k < 0.12) {
      const n = Math.floor(r() * 3)
      return `[${Array.from({ length: n }, () => rowValue(r, depth + 1)).join(r() < 0.8 ? ',' : ' , ')}]`
    }
    if (depth < 10 && k < 0.2) return row(r, depth + 1)
    // Valid shapes mostly; now and then one JSON refuses, which the reader must leave alone.
    const valid = [
      '"row 7"',
      '""',
      '"a\\"b"',
      '"\\\\"',
      '"\\/\\b\\f\\n\\r\\t"',
      '"\\u00e9x"',
      '"é😀"',
      '"\u007f"',
      '0',
      '7',
      '-3',
      '12.5',
      '-0.25e+3',
      '1E9',
      '0e0',
      '1e-2',
      '-0',
      '10',
      'true',
      'false',
      'null',
    ]
    const invalid = [
      '"\\x"',
      '"\\u12G4"',
      '"\\u12"',
      '"a\u0001b"',
      '"a\tb"',
      '"\u001f"',
      '01',
      '-',
      '1.',
      '.5',
      '1e',
      '1e+',
      '-01',
      '--1',
      '+1',
      '0x1',
      '00',
      'tru',
      'fals',
      'nul',
      'True',
      'nulll',
    ]
    const list = r() < 0.03 ? invalid : valid
    return list[Math.floor(r() * list.length)]!
  }
  function row(r: () => number, depth: number): string {
    const n = Math.floor(r() * 5)
    const sp = () => (r() < 0.15 ? [' ', '\n', '\t', '\r', '  '][Math.floor(r() * 5)]! : '')
    const keys = ['"Name"', '"Count"', '"a\\"k"', '"\\u0041"', '"k\u0002"', '""']
    const fields = Array.from(
      { length: n },
      () =>
        `${sp()}${keys[Math.floor(r() * keys.length)]!}${sp()}:${sp()}${rowValue(r, depth)}${sp()}`
    )
    return `{${fields.join(',')}${n === 0 ? sp() : ''}}`
  }

  function edit(r: () => number, text: string): string {
    const i = Math.floor(r() * text.length)
    const junk = ',;:{}[]"\\ 0159.eE+-tfnx\u0001'
    const c = r() < 0.2 ? '' : junk[Math.floor(r() * junk.length)]!
    return text.slice(0, i) + c + text.slice(i + 1)
  }

  it('agrees with JSON.parse on 3,000 bodies of generated rows, in whole and in cut chunks', () => {
    const r = rng(7)
    for (let i = 0; i < 3_000; i++) {
      const rows = Array.from({ length: 1 + Math.floor(r() * 30) }, () =>
        r() < 0.9 ? row(r, 0) : rowValue(r, 0)
      )
      let text = `{"table_name":"T","rows":[${rows.join(r() < 0.8 ? ',' : ', ')}],"x":1}`
      // One to three bytes replaced or dropped: a fault anywhere in a row, the reader's part
      if (r() < 0.3) for (let e = 1 + Math.floor(r() * 3); e > 0; e--) text = edit(r, text)
      const want = viaParse(text)
      // Whole: the reader takes every row it can; in chunks, rows cut by a chunk's end go byte by byte.
      expect(viaScanner(text, text.length + 1), text).toBe(want)
      expect(viaScanner(text, 16 + Math.floor(r() * 200)), text).toBe(want)
    }
  })

  it('reads no byte past a chunk, whatever an earlier body left in the copy it reads', () => {
    // The scanner reads a copy of each chunk with a 0 after it (the row reader tests no
    // bound). Before each body, a long chunk of `"}` fills that copy, so a read past a chunk's
    // end would close a row the chunk cut, and the rest of it in the next chunk would not parse.
    const stale = Buffer.from(`{"rows":["${'"}'.repeat(40_000)}`)
    const r = rng(11)
    for (let i = 0; i < 1_000; i++) {
      // Not JSON: the scanner throws at its first `}` (after copying the bytes it reads).
      expect(() => new JsonBodyScanner({ count: 'rows' }).write(stale)).toThrow(JsonSyntaxError)
      const rows = Array.from({ length: 1 + Math.floor(r() * 20) }, () =>
        r() < 0.9 ? row(r, 0) : rowValue(r, 0)
      )
      if (r() < 0.2) rows.push(`{"Notes":"${'x\\n'.repeat(Math.floor(r() * 400))}","n":12}`)
      let text = `{"table_name":"T","rows":[${rows.join(',')}]}`
      if (r() < 0.3) text = edit(r, text)
      expect(viaScanner(text, 1 + Math.floor(r() * 120)), text).toBe(viaParse(text))
    }
  })

  it('counts rows nested past its depth, and flat rows after them, as JSON.parse does', () => {
    const deep = (d: number): string => (d === 0 ? '1' : `{"a":[${deep(d - 1)}]}`)
    const rows = [
      ...Array.from({ length: 20 }, () => deep(12)),
      ...Array.from({ length: 50 }, (_, i) => `{"n":${i}}`),
    ]
    const text = `{"rows":[${rows.join(',')}]}`
    expect(viaScanner(text, text.length)).toBe('count:70')
    // A fault in a row the reader reads (no deep rows before it to stop it trying).
    const flat = `{"rows":[${Array.from({ length: 50 }, (_, i) => `{"n":${i},"s":"x"}`).join(',')}]}`
    for (const [from, to] of [
      ['{"n":49', '{"n":049'],
      ['{"n":49', '{"n":-049'],
      ['{"n":49', '{,"n":49'],
      ['{"n":49', '{"n";49'],
      ['{"n":49', '{"n":4.'],
      ['{"n":49', '{"n":4e'],
      ['{"n":49', '{"n":4ex'],
      ['{"n":49', '{"n":4.x'],
      ['"s":"x"}]', '"s":"\\u00x1"}]'],
      ['"s":"x"}]', '"s":"\\q"}]'],
      ['"s":"x"}]', '"s":"x\u0000"}]'],
      ['"s":"x"}]', '"s":nulL}]'],
      ['"s":"x"}]', '"s":"x"]]'],
      ['"s":"x"}]', '"s":["x"}}]'],
    ] as const) {
      const bad = flat.replace(from, to)
      expect(bad, to).not.toBe(flat)
      expect(viaScanner(bad, bad.length), to).toBe('invalid')
    }
    expect(viaScanner(flat, flat.length)).toBe('count:50')
  })
})

describe('JsonBodyScanner: keys as a case-insensitive server reads them (issue #20)', () => {
  it.each([
    ['{"rows":[],"Rows":[1,2,3]}', 'count:3'],
    ['{"ROWS":[1,2,3],"rows":[]}', 'count:0'],
    ['{"rOwS":[1,2]}', 'count:2'],
    // Go folds each character: the long s (ſ) upper-cases to S.
    ['{"row\u017f":[1,2,3,4]}', 'count:4'],
    ['{"\\u0052ows":[1]}', 'count:1'],
  ])('%s → %s', (text, want) => {
    expect(viaScanner(text, 2)).toBe(want)
  })

  it('folds as Go does: upper after lower', () => {
    expect(foldKey('Rows')).toBe(foldKey('rows'))
    expect(foldKey('\u212aey')).toBe(foldKey('key')) // the Kelvin sign
    expect(foldKey('sql')).not.toBe(foldKey('sqls'))
  })
})

describe('JsonBodyScanner: nesting is capped (issue #20)', () => {
  const nested = (depth: number) => `{"rows":[${'['.repeat(depth)}${']'.repeat(depth)}]}`

  it(`accepts ${MAX_DEPTH} levels and refuses one more`, () => {
    // The object and the rows array are two levels.
    expect(viaScanner(nested(MAX_DEPTH - 2), 64)).toBe('count:1')
    expect(() => {
      const c = new JsonBodyScanner({ count: 'rows' })
      c.write(Buffer.from(nested(MAX_DEPTH - 1)))
    }).toThrow(/nested deeper than 512/)
  })

  it('a 100,000-deep body fails fast with memory bounded by the cap', () => {
    const c = new JsonBodyScanner({ count: 'rows' })
    const before = process.memoryUsage().heapUsed
    expect(() => {
      c.write(Buffer.from('{"rows":['))
      for (let i = 0; i < 100; i++) c.write(Buffer.alloc(1000, 0x5b))
    }).toThrow(JsonSyntaxError)
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(5_000_000)
  })
})

describe('JsonBodyScanner: spans of captured fields', () => {
  const spanText = (text: string, name: string, chunk: number) => {
    const c = new JsonBodyScanner({ count: null, capture: ['sql', 'parameters'] })
    const buf = Buffer.from(text)
    for (let i = 0; i < buf.length; i += chunk) c.write(buf.subarray(i, i + chunk))
    c.end()
    const s = c.spans.get(name)
    return s === undefined ? undefined : buf.subarray(s.start, s.end).toString()
  }

  it.each([1, 3, 100])('finds the last occurrence, any case, in chunks of %i', (chunk) => {
    const text =
      '{"sql":"SELECT 1","x":{"sql":"no"},"SQL" : "SELECT * LIMIT ?" ,"Parameters":[1, "a", {"b":[2]}, 20000 ]}'
    expect(spanText(text, 'sql', chunk)).toBe('"SELECT * LIMIT ?"')
    expect(spanText(text, 'parameters', chunk)).toBe('[1, "a", {"b":[2]}, 20000 ]')
  })

  it('finds numbers, literals and objects whole', () => {
    expect(spanText('{"sql":12}', 'sql', 1)).toBe('12')
    expect(spanText('{"sql":null , "a":1}', 'sql', 2)).toBe('null')
    expect(spanText('{"sql":{"a":[1]}}', 'sql', 2)).toBe('{"a":[1]}')
  })
})

describe('arrayElement: one element of a JSON array, parsed alone', () => {
  it.each([
    ['[1, "a", {"b":[2,3]}, 20000 ]', 0, 1],
    ['[1, "a", {"b":[2,3]}, 20000 ]', 1, 'a'],
    ['[1, "a", {"b":[2,3]}, 20000 ]', 2, { b: [2, 3] }],
    ['[1, "a", {"b":[2,3]}, 20000 ]', 3, 20000],
    ['[1, "a", {"b":[2,3]}, 20000 ]', 4, undefined],
    ['["x,]\\"", [1,[2]], 7]', 2, 7],
    ['[]', 0, undefined],
  ])('%s [%i]', (text, i, want) => {
    expect(arrayElement(Buffer.from(text), i)).toEqual(want)
  })
})
