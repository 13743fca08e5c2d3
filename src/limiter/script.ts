import { readFileSync } from 'node:fs'

/**
 * What several scripts share, each rule written once (issue #48), prepended by name:
 * `clock` the store's clock (check, give-back), `prelude` the windows' layout (check,
 * give-back), `ledger` a team's month and the ring of checks (check, give-back, credit,
 * ledger-add), `once` once per batch (every script that writes a recorder's batch). They live
 * in `limiter/lua/`.
 */
export type Shared = 'clock' | 'prelude' | 'ledger' | 'once'

/** A part of a script's own, read beside it and placed among the shared parts (`{ own: name }`). */
export type Part = Shared | { own: string }

const shared = (name: Shared) => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8')

/**
 * A Lua script of the store, read from beside the module that runs it (issue #48: each script
 * in its room, `tuning/shape-add.lua` beside `tuning/shape-store.ts`): `scriptBeside(import.meta.url,
 * 'shape-add', ['once'])`, after the shared parts it names. The one way a module reads a
 * script, so no room reaches into another's files. The build copies every `.lua` of src/ to
 * the same place under dist/src/.
 */
export function scriptBeside(moduleUrl: string, name: string, uses: readonly Part[] = []): string {
  const beside = (file: string) => readFileSync(new URL(`./${file}.lua`, moduleUrl), 'utf8')
  return [
    ...uses.map((p) => (typeof p === 'string' ? shared(p) : beside(p.own))),
    beside(name),
  ].join('\n')
}
