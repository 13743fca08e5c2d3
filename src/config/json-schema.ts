import { z } from 'zod'
import { limitsFileSchema, planSchema } from './schema.js'

/**
 * limits.yaml as JSON Schema, generated from the schema the code validates with, so an
 * editor completes and checks the file with the same rules (cross-field checks such as
 * "a public admin host needs a token" stay in code).
 */
export function limitsJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(limitsFileSchema, {
    io: 'input',
    unrepresentable: 'any',
    override: (ctx) => {
      // The code's refine ("exactly one of calls or calls_per_user"), said in JSON Schema.
      if (ctx.zodSchema === planSchema)
        ctx.jsonSchema.oneOf = [{ required: ['calls'] }, { required: ['calls_per_user'] }]
    },
  }) as Record<string, unknown>
  return {
    ...schema,
    $id: 'https://basegate.dev/schema/limits.schema.json',
    title: 'basegate limits.yaml',
    description:
      'The one configuration file of basegate, a rate-limiting reverse proxy for a self-hosted SeaTable server.',
  }
}
