import { formatProblems, loadConfigFile } from '../config/load.js'
import type { FlagOverrides } from '../config/overrides.js'
import type { Config, ConfigProblem } from '../types.js'

/**
 * The configuration, or exit 2 with one line per problem (SPEC §1), flag problems included:
 * the one way every command (serve, check, upgrade-report) loads the file.
 */
export async function loadConfigOrExit(
  file: string,
  env: NodeJS.ProcessEnv,
  flags: FlagOverrides,
  flagProblems: readonly ConfigProblem[] = []
): Promise<Config> {
  const loaded = await loadConfigFile(file, env, flags)
  const problems = [...flagProblems, ...(loaded.ok ? [] : loaded.problems)]
  if (!loaded.ok || problems.length > 0) {
    process.stderr.write(formatProblems(problems) + '\n')
    process.exit(2)
  }
  return loaded.config
}
