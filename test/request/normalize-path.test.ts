import { describe, expect, it } from 'vitest'
import { normalizePath, routeOf, splitTarget } from '../../src/request/normalize-path.js'

describe('normalizePath (SPEC §6)', () => {
  it.each([
    ['/api2/ping/', '/api2/ping/'],
    ['/', '/'],
    ['//api2//ping', '/api2/ping'],
    ['/ping/../api/v2.1/dtable/', '/api/v2.1/dtable/'],
    ['/a/./b/.', '/a/b/'],
    ['/a/b/..', '/a/'],
    ['/a/%2e%2e/b', '/b'],
    ['/a/%2E./b', '/b'],
    ['/%61pi2/auth-token/', '/api2/auth-token/'],
    ['/x/%7Euser', '/x/~user'],
    ['/x/%20y', '/x/%20y'],
    ['/x/%3a', '/x/%3A'],
    ['/a//../b', '/b'],
    ['/api-gateway/api/v2/dtables/ABC/rows', '/api-gateway/api/v2/dtables/ABC/rows'],
  ])('%s → %s', (raw, expected) => {
    expect(normalizePath(raw)).toEqual({ ok: true, path: expected })
  })

  it.each([
    ['/a/%2Fb', 'encoded /'],
    ['/a/%2fb', 'encoded /'],
    ['/a/%5Cb', 'encoded /'],
    ['/a/%5cb', 'encoded /'],
    ['/a\\b', 'backslash'],
    ['/a/%00', 'NUL'],
    ['/a/\0', 'NUL'],
    ['/..', 'above the root'],
    ['/a/../..', 'above the root'],
    ['/%2e%2e/etc', 'above the root'],
    ['/a/%zz', 'malformed'],
    ['/a/%2', 'malformed'],
    ['api2/ping', 'start with /'],
  ])('refuses %s', (raw, reason) => {
    const r = normalizePath(raw)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.reason).toContain(reason)
  })
})

describe('splitTarget', () => {
  it('keeps the raw query string', () => {
    expect(splitTarget('/a/b?x=1&y=%2F')).toEqual({ path: '/a/b', query: '?x=1&y=%2F' })
    expect(splitTarget('/a')).toEqual({ path: '/a', query: '' })
  })
  it('takes the path out of an absolute-form target', () => {
    expect(splitTarget('http://evil.example/api2/ping?x')).toEqual({
      path: '/api2/ping',
      query: '?x',
    })
    expect(splitTarget('http://evil.example')).toEqual({ path: '/', query: '' })
  })
})

describe('routeOf: path parameters as a router that drops them reads the path (issue #31 item 6)', () => {
  it.each([
    ['/dtable-server;a=b/api/v1/dtables/x/rows/', '/dtable-server/api/v1/dtables/x/rows/'],
    ['/api-gateway/api/v2/dtables/x/rows;jsessionid=1/', '/api-gateway/api/v2/dtables/x/rows/'],
    ['/api-gateway/..;/dtable-db/api/v1/query/x/', '/dtable-db/api/v1/query/x/'],
    ['/a/;x/b', '/a/b'],
    ['/plain/path/', '/plain/path/'],
  ])('%s reads as %s', (path, route) => {
    expect(routeOf(path)).toBe(route)
  })
  it('a parameter that hides a climb above the root is refused', () => {
    expect(routeOf('/..;/etc')).toBeNull()
  })
})
