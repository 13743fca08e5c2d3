import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

// Issue #32: src/ stands on floors. A room (a top-level folder or file of src/) imports only
// rooms on floors below its own, so no two rooms import each other, around any circle; inside
// a room, no file imports a file that imports it back. Type imports count too: a circle of
// types is still a circle a reader has to hold in their head. Imports are read with the
// TypeScript parser (`import type`, `import { type X }`, `export … from`, `import()`).
//
// A new room fails this test until it is given a floor here (and in the README's "Where to change what").

/** Bottom to top. A room may import any room on a lower floor. */
const FLOORS: readonly (readonly string[])[] = [
  ['types.ts', 'clock.ts', 'version.ts', 'mask-url.ts', 'hash.ts', 'node-options.ts'],
  ['request', 'limiter', 'quota', 'batch', 'node-version.ts'],
  ['history', 'overrides', 'size', 'usage'],
  ['http'],
  ['config', 'protect'],
  ['observe', 'tuning'],
  ['spine'],
  ['admin', 'deps.ts', 'websocket.ts'],
  ['app.ts'],
  ['process'],
  ['demo-upstream.ts', 'healthcheck.ts'],
  ['cli.ts', 'demo.ts'],
  ['serve.ts'],
  ['main.ts'],
]

const SRC = fileURLToPath(new URL('../../src', import.meta.url))

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : []
  })
}

/** Every file of src/ a file imports (relative specifiers resolved; packages left out). */
export function importsOf(file: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)
  const specs: string[] = []
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier !== undefined &&
      ts.isStringLiteral(node.moduleSpecifier)
    )
      specs.push(node.moduleSpecifier.text)
    else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteral(node.arguments[0])
    )
      specs.push(node.arguments[0].text)
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return specs
    .filter((s) => s.startsWith('.'))
    .map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')))
    .filter((p) => p.startsWith(SRC) && existsSync(p))
}

const roomOf = (file: string) => relative(SRC, file).split(sep)[0]!

/** The strongly connected groups of more than one node (Tarjan). */
function circles(graph: Map<string, Set<string>>): string[][] {
  let index = 0
  const idx = new Map<string, number>()
  const low = new Map<string, number>()
  const on = new Set<string>()
  const stack: string[] = []
  const out: string[][] = []
  const strong = (v: string): void => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    on.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!))
    }
    if (low.get(v) === idx.get(v)) {
      const group: string[] = []
      let w: string
      do {
        w = stack.pop()!
        on.delete(w)
        group.push(w)
      } while (w !== v)
      if (group.length > 1) out.push(group.sort())
    }
  }
  for (const v of graph.keys()) if (!idx.has(v)) strong(v)
  return out
}

describe('src/ floors (issue #32)', () => {
  const all = files(SRC)
  const graph = new Map(all.map((f) => [f, new Set(importsOf(f))]))
  const floorOf = new Map(FLOORS.flatMap((rooms, floor) => rooms.map((r) => [r, floor] as const)))

  it('every room has a floor', () => {
    const rooms = [...new Set(all.map(roomOf))].sort()
    expect(rooms.filter((r) => !floorOf.has(r))).toEqual([])
  })

  it('a room imports only rooms on lower floors', () => {
    const upward: string[] = []
    for (const [file, targets] of graph) {
      for (const t of targets) {
        const [from, to] = [roomOf(file), roomOf(t)]
        if (from === to) continue
        if ((floorOf.get(to) ?? Infinity) >= (floorOf.get(from) ?? -1))
          upward.push(`${relative(SRC, file)} → ${relative(SRC, t)} (${from} is not above ${to})`)
      }
    }
    expect(upward).toEqual([])
  })

  it('no file imports a file that imports it back, directly or around a circle', () => {
    expect(circles(graph).map((c) => c.map((f) => relative(SRC, f)).join(' ↔ '))).toEqual([])
  })

  // Issue #48: a room's files are its own. A store script lives beside the module that runs
  // it and is read through limiter/script.ts's scriptBeside (an import this test sees); no
  // module reaches into another room's folder for a file.
  it('each store script beside the module that loads it, through scriptBeside', () => {
    const lua = (dir: string): string[] =>
      readdirSync(dir).flatMap((f) => {
        const p = join(dir, f)
        return statSync(p).isDirectory() ? lua(p) : p.endsWith('.lua') ? [p] : []
      })
    const sources = files(SRC).map((f) => ({ f, text: readFileSync(f, 'utf8') }))
    for (const { f, text } of sources) {
      expect(text.includes('limiter/lua/') && roomOf(f) !== 'limiter', relative(SRC, f)).toBe(false)
      const loader = relative(SRC, f) === join('limiter', 'script.ts')
      expect(!loader && /readFileSync\([^)]*\.lua/.test(text), relative(SRC, f)).toBe(false)
    }
    const scripts = lua(SRC)
    expect(scripts.length).toBeGreaterThanOrEqual(9)
    for (const script of scripts) {
      const name = script.slice(script.lastIndexOf(sep) + 1, -'.lua'.length)
      const here = dirname(script)
      const loader = sources.find(
        ({ f, text }) =>
          (dirname(f) === here || dirname(f) === dirname(here)) &&
          text.includes('scriptBeside(') &&
          (text.includes(`'${name}'`) || text.includes(`lua('${name}')`))
      )
      expect(loader, relative(SRC, script)).toBeDefined()
    }
  })

  // Issue #48: Redis asks every script to declare the keys it touches (a Cluster routes by
  // them); a key built inside a script (`KEYS[1] .. ':k:'`) is one KEYS did not give it.
  it('no store script builds a key: every key it touches comes in KEYS', () => {
    const lua = (dir: string): string[] =>
      readdirSync(dir).flatMap((f) => {
        const p = join(dir, f)
        return statSync(p).isDirectory() ? lua(p) : p.endsWith('.lua') ? [p] : []
      })
    const built = lua(SRC).flatMap((script) =>
      readFileSync(script, 'utf8')
        .split('\n')
        .filter((line) => /KEYS\[[^\]]*\]\s*\.\.|\.\.\s*KEYS\[/.test(line.replace(/--.*$/, '')))
        .map((line) => `${relative(SRC, script)}: ${line.trim()}`)
    )
    expect(built).toEqual([])
  })

  it('finds a circle when there is one (the check itself)', () => {
    const g = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a'])],
      ['d', new Set(['a'])],
    ])
    expect(circles(g)).toEqual([['a', 'b', 'c']])
    const withType = join(SRC, 'http', 'call.ts')
    expect(importsOf(withType).map((p) => relative(SRC, p))).toContain('types.ts')
  })
})
