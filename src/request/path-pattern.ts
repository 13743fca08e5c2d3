import { UUID_PATTERN } from './base-uuid.js'

// The one compiler of path patterns, for the rules of limits.yaml (SPEC §3) and the change
// history's endpoints (SPEC §8): whole-path, ASCII case-insensitive, trailing `/` optional.

/**
 * `{base_uuid}` matches a base UUID in any of its forms, `{token}` (with `token: true`) one
 * path segment, `*` at the end any rest.
 */
export function compilePathPattern(pattern: string, opts: { token?: boolean } = {}): RegExp {
  let p = pattern
  const star = p.endsWith('*')
  if (star) p = p.slice(0, -1)
  else if (p.length > 1 && p.endsWith('/')) p = p.slice(0, -1)
  const placeholders = opts.token === true ? /(\{base_uuid\}|\{token\})/ : /(\{base_uuid\})/
  const body = p
    .split(placeholders)
    .map((part) =>
      part === '{base_uuid}'
        ? UUID_PATTERN
        : part === '{token}' && opts.token === true
          ? '[^/]+'
          : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
    )
    .join('')
  return new RegExp(`^${body}${star ? '.*' : '/?'}$`, 'i')
}
