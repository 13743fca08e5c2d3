// Issue #11: tokens carried in paths (share links, external links, upload and download links)
// must not reach the logs whole. The segment after one of these markers is a token: it is
// cut to a 4-character prefix, enough to tell two links apart in support, too short to use.

const TOKEN_AFTER =
  /(\/(?:external-links|share-links|external-link-tokens|upload-links|download-links|share-link|upload-api|upload-aj|update-api|files|d|f|u\/d)\/)([^/]+)/gi

const KEEP = 4

/** The path as logged: every token segment cut to its first characters. */
export function maskPathTokens(path: string): string {
  // Fast path: most API paths carry none of the markers.
  if (!/links?\/|tokens\/|\/(?:d|f|u|upload-a[pj]i?|update-api|files)\//i.test(path)) return path
  return path.replace(TOKEN_AFTER, (_m, head: string, token: string) =>
    token.length <= KEEP ? head + token : `${head}${token.slice(0, KEEP)}…`
  )
}
