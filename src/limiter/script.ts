import { readFileSync } from 'node:fs'

/**
 * A Lua script of the store, read from beside the module that runs it (issue #48: each script
 * in its room, `tuning/shape-add.lua` beside `tuning/shape-store.ts`): `scriptBeside(import.meta.url,
 * 'shape-add')`. The one way a module reads a script, so no room reaches into another's files.
 * The build copies every `.lua` of src/ to the same place under dist/src/.
 */
export function scriptBeside(moduleUrl: string, name: string): string {
  return readFileSync(new URL(`./${name}.lua`, moduleUrl), 'utf8')
}
