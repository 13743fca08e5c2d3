// SPEC §6: tokens carried in paths (share, invite and external links, forms, universal and
// external apps, upload and download links) never leave basegate whole. The segment after one
// of these markers is a token: wherever basegate writes or answers the path it shows as its
// first 4 characters (enough to tell two links apart in support, too short to use), and it is
// never taken as a base, even when it is shaped like a UUID.

/** Marker segments (lower case) after which the next segment is a token. */
const MARKERS: ReadonlySet<string> = new Set([
  'external-links',
  'view-external-links',
  'share-links',
  'invite-links',
  'external-link-tokens',
  'upload-links',
  'download-links',
  'forms',
  'universal-apps',
  'external-apps',
  // The file server's link forms (seafile): /d/{t}/, /f/{t}/, /u/d/{t}/, upload/update APIs.
  'share-link',
  'upload-api',
  'upload-aj',
  'update-api',
  'files',
  'd',
  'f',
])

const KEEP = 4

/** A cheap test first: most API paths carry none of the markers. */
const MAYBE = /links?\/|tokens\/|forms\/|apps\/|\/(?:d|f|upload-a[pj]i?|update-api|files)\//i

/** Whether the segment that follows `prev` is a token. */
export function isTokenMarker(prev: string): boolean {
  return MARKERS.has(prev.toLowerCase())
}

/** Calls `fn(start, end)` for each token segment of `path`. */
function eachToken(path: string, fn: (start: number, end: number) => void): void {
  if (!MAYBE.test(path)) return
  let start = 1
  let prevStart = 0
  let prevEnd = 0
  while (start <= path.length) {
    let end = path.indexOf('/', start)
    if (end === -1) end = path.length
    if (end > start && prevEnd > prevStart && isTokenMarker(path.slice(prevStart, prevEnd))) {
      fn(start, end)
    }
    prevStart = start
    prevEnd = end
    start = end + 1
  }
}

/** The path with every token segment cut to its first characters (`abcd…`), for logs and answers. */
export function maskPathTokens(path: string): string {
  return replaceTokens(path, (t) => (t.length <= KEEP ? t : `${t.slice(0, KEEP)}…`))
}

/** The path with every token segment named by its pattern (`{token}`), for error messages. */
export function pathPattern(path: string): string {
  return replaceTokens(path, () => '{token}')
}

function replaceTokens(path: string, by: (token: string) => string): string {
  let out = ''
  let at = 0
  eachToken(path, (start, end) => {
    out += path.slice(at, start) + by(path.slice(start, end))
    at = end
  })
  return at === 0 ? path : out + path.slice(at)
}
