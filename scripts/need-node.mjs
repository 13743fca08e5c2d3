// `npm test` on an older Node: one line saying so, before a build and a minute of failing tests
// (issue #49: Node 20 spent 71 s failing 56 tests before anything said "Node 24").
import { readFileSync } from 'node:fs'

const engines = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.url), 'utf8')
).engines
const need = Number(/(\d+)/.exec(engines.node)[1])
const have = Number(process.versions.node.split('.')[0])
if (have < need) {
  process.stderr.write(
    `basegate needs Node ${need} or newer (engines: ${engines.node}); this is Node ${process.versions.node}. ` +
      `\`source .ci/node\` puts Node ${need} from the npm registry first on PATH.\n`
  )
  process.exit(2)
}
