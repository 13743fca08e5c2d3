import { readFileSync } from 'node:fs'

/**
 * What several scripts share, each rule written once (issue #48), by name: `prelude` the
 * windows' layout and the store's clock (check, give-back), `windows` reading a window's
 * buckets (check, give-back), `ledger` a team's month and the ring of checks (check,
 * give-back, credit, ledger-add), `once` once per batch (every script that writes a recorder's
 * batch). They live in `limiter/lua/`.
 */
export type Shared = 'prelude' | 'windows' | 'ledger' | 'once'

/**
 * A line `-- #include windows ledger` in a script stands for those shared parts, placed there
 * rather than before the script: Lua makes each function anew on every run, so a script that
 * can answer early (check.lua's commonest call, issue #47) names its functions after that.
 */
const INCLUDE = /^-- #include ((?:[a-z]+ ?)+)$/gm

const isShared = (name: string): name is Shared =>
  name === 'prelude' || name === 'windows' || name === 'ledger' || name === 'once'

const shared = (name: Shared) => readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8')

/**
 * A Lua script of the store, read from beside the module that runs it (issue #48: each script
 * in its room, `tuning/shape-add.lua` beside `tuning/shape-store.ts`): `scriptBeside(import.meta.url,
 * 'shape-add', ['once'])`, after the shared parts it names (and with those its `-- #include`
 * lines name). The one way a module reads a
 * script, so no room reaches into another's files. The build copies every `.lua` of src/ to
 * the same place under dist/src/.
 */
export function scriptBeside(
  moduleUrl: string,
  name: string,
  uses: readonly Shared[] = []
): string {
  const own = readFileSync(new URL(`./${name}.lua`, moduleUrl), 'utf8').replace(
    INCLUDE,
    (_, names: string) =>
      names
        .trim()
        .split(' ')
        .map((n) => {
          if (!isShared(n)) throw new Error(`${name}.lua includes ${n}, which is not a shared part`)
          return shared(n)
        })
        .join('\n')
  )
  return [...uses.map(shared), own].join('\n')
}
