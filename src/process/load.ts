import { formatProblems, loadConfigFile } from '../config/load.js'
import type { Flags } from '../config/flags.js'
import type { Config, ConfigProblem } from '../types.js'

/**
 * The configuration, or exit 2 with one line per problem (SPEC §1), flag problems included:
 * the one way every command (serve, check, upgrade-report) loads the file.
 */
export async function loadConfigOrExit(
  file: string,
  env: NodeJS.ProcessEnv,
  flags: Flags,
  flagProblems: readonly ConfigProblem[] = []
): Promise<{ config: Config; warnings: ConfigProblem[] }> {
  const loaded = await loadConfigFile(file, env, flags)
  const problems = [...flagProblems, ...(loaded.ok ? [] : loaded.problems)]
  if (!loaded.ok || problems.length > 0) {
    process.stderr.write(formatProblems(problems) + '\n')
    process.exit(2)
  }
  return { config: loaded.config, warnings: loaded.warnings }
}

/** Warnings as `warning: field: message` lines, for the terminal. */
export function formatWarnings(warnings: readonly ConfigProblem[]): string {
  return warnings.map((w) => `warning: ${w.field}: ${w.message}`).join('\n')
}
