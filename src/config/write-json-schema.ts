// npm run schema: writes schema/limits.schema.json from the code's schema.
import { mkdirSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { limitsJsonSchema } from './json-schema.js'

const out = fileURLToPath(new URL('../../../schema/limits.schema.json', import.meta.url))
mkdirSync(fileURLToPath(new URL('../../../schema/', import.meta.url)), { recursive: true })
writeFileSync(out, JSON.stringify(limitsJsonSchema(), null, 2) + '\n')
process.stdout.write(`wrote ${out}\n`)
