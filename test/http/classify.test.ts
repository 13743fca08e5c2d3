import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/load.js'
import { compileClassifier } from '../../src/http/classify.js'
import { compilePathPattern } from '../../src/request/path-pattern.js'

function classifier(yaml = '') {
  const r = parseConfig(yaml, {})
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  return compileClassifier(r.config)
}

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const U32 = '6f1c2a4e0d3b4c599a513e2d7c8b9a10'
const NOW = Date.parse('2026-11-22T10:00:00Z')

describe('classify: classes (SPEC §3)', () => {
  const c = classifier()
  it.each([
    ['/ping', 'exempt'],
    ['/ping/', 'exempt'],
    ['/PING', 'exempt'],
    ['/pingfoo', 'other'],
    ['/server-info/', 'exempt'],
    ['/api2/ping/', 'exempt'],
    ['/api-gateway/api/v2/ping/', 'exempt'],
    ['/api2/auth-token/', 'auth_token'],
    ['/API2/Auth-Token', 'auth_token'],
    ['/api2/auth-token/x', 'account'],
    [`/api-gateway/api/v2/dtables/${U}/rows/`, 'base'],
    ['/Api-Gateway/anything', 'base'],
    ['/api/v2.1/dtable/app-access-token/', 'account'],
    ['/api2/repos/', 'account'],
    ['/api/v1/admin/', 'account'],
    ['/api/v2/x', 'other'],
    ['/socket.io/', 'other'],
    ['/seafhttp/files/x', 'other'],
    ['/', 'other'],
  ])('%s is %s', (path, cls) => {
    expect(c.classify('GET', path, '1.2.3.4', NOW).cls).toBe(cls)
  })
})

describe('classify: keys', () => {
  const c = classifier()
  it.each([U, U.toUpperCase(), U32, U32.toUpperCase()])(
    'every UUID form of one base is one key: %s',
    (u) => {
      const r = c.classify('GET', `/api-gateway/api/v2/dtables/${u}/rows/`, '1.2.3.4', NOW)
      expect(r.key).toBe(`base:${U32}`)
      expect(r.charges.map((x) => x.key)).toEqual([`{b:${U32}}:base:60000:l2`])
    }
  )

  it('counts per IP when there is no base UUID', () => {
    expect(c.classify('GET', '/api2/repos/', '9.9.9.9', NOW).key).toBe('ip:9.9.9.9')
    expect(
      c.classify('GET', '/api-gateway/api/v2/dtables/not-a-uuid/rows/', '9.9.9.9', NOW).key
    ).toBe('ip:9.9.9.9')
    // A UUID that is only part of a segment is not a base.
    expect(c.classify('GET', `/api-gateway/api/v2/dtables/${U}x/rows/`, '9.9.9.9', NOW).key).toBe(
      'ip:9.9.9.9'
    )
  })

  it('counts each class separately for one base', () => {
    const gw = c.classify('GET', `/api-gateway/api/v2/dtables/${U}/rows/`, '1.1.1.1', NOW)
    const acct = c.classify('GET', `/api/v2.1/dtables/${U}/`, '1.1.1.1', NOW)
    expect(gw.key).toBe(acct.key)
    expect(gw.charges[0]!.key).not.toBe(acct.charges[0]!.key)
  })

  it('unlimited and exempt calls carry no windows and no headers', () => {
    expect(c.classify('GET', '/ping', '1.1.1.1', NOW)).toMatchObject({
      charges: [],
      emitHeaders: false,
    })
    expect(c.classify('GET', '/socket.io/', '1.1.1.1', NOW)).toMatchObject({
      charges: [],
      emitHeaders: false,
    })
    expect(c.classify('POST', '/api2/auth-token/', '1.1.1.1', NOW)).toMatchObject({
      charges: [],
      emitHeaders: false,
    })
  })

  it('headers: gateway puts them on base calls only; all on every limited class; none nowhere', () => {
    expect(c.classify('GET', `/api-gateway/api/v2/dtables/${U}/`, 'a', NOW).emitHeaders).toBe(true)
    expect(c.classify('GET', '/api2/repos/', 'a', NOW).emitHeaders).toBe(false)
    const all = classifier('headers: all')
    expect(all.classify('GET', '/api2/repos/', 'a', NOW).emitHeaders).toBe(true)
    const none = classifier('headers: none')
    expect(none.classify('GET', `/api-gateway/api/v2/dtables/${U}/`, 'a', NOW).emitHeaders).toBe(
      false
    )
  })
})

describe('classify: rules and the IP ceiling', () => {
  const c = classifier(`
rate_limits:
  rules:
    - name: list-rows
      method: [GET]
      path: /api-gateway/api/v2/dtables/{base_uuid}/rows/
      limits: [100/min, 6000/hour]
    - name: any-sql
      path: /api-gateway/api/v2/dtables/{base_uuid}/sql*
      limits: 10/s
  ip_ceiling: 5000/min
`)
  it('adds a matching rule on its own key, per method', () => {
    const get = c.classify('GET', `/api-gateway/api/v2/dtables/${U}/rows`, '1.1.1.1', NOW)
    expect(get.charges.map((x) => [x.kind, x.key, x.limit])).toEqual([
      ['class', `{b:${U32}}:base:60000:l2`, 500],
      ['rule', `{b:${U32}}:rule:list-rows:60000:l2`, 100],
      ['rule', `{b:${U32}}:rule:list-rows:3600000:l2`, 6000],
      ['ip_ceiling', '{ip:1.1.1.1}:ceiling:60000:l2', 5000],
    ])
    const post = c.classify('POST', `/api-gateway/api/v2/dtables/${U}/rows/`, '1.1.1.1', NOW)
    expect(post.charges.map((x) => x.kind)).toEqual(['class', 'ip_ceiling'])
  })

  it('a * at the end matches any rest', () => {
    const r = c.classify(
      'POST',
      `/api-gateway/api/v2/dtables/${U.toUpperCase()}/sql`,
      '1.1.1.1',
      NOW
    )
    expect(r.charges.some((x) => x.kind === 'rule' && x.rule === 'any-sql')).toBe(true)
  })

  it('the ceiling is charged on API classes only, on the client IP', () => {
    expect(c.classify('GET', '/api2/repos/', '2.2.2.2', NOW).charges.map((x) => x.kind)).toEqual([
      'class',
      'ip_ceiling',
    ])
    expect(c.classify('GET', '/web/', '2.2.2.2', NOW).charges).toEqual([])
  })

  it('compilePathPattern: trailing slash optional, case-insensitive, whole path', () => {
    const re = compilePathPattern('/api-gateway/api/v2/dtables/{base_uuid}/rows/')
    expect(re.test(`/api-gateway/api/v2/dtables/${U}/rows`)).toBe(true)
    expect(re.test(`/API-GATEWAY/api/v2/dtables/${U32}/rows/`)).toBe(true)
    expect(re.test(`/api-gateway/api/v2/dtables/${U}/rows/x`)).toBe(false)
    expect(re.test('/api-gateway/api/v2/dtables/zzz/rows/')).toBe(false)
  })
})

describe('classify: every API generation keys on its base (SPEC §3, SERVICE.md client paths)', () => {
  const c = classifier()
  const cases: [string, string][] = [
    [`/api-gateway/api/v2/dtables/${U}/rows/`, 'base'],
    [`/api-gateway/api/v2/dtables/${U}/sql`, 'base'],
    [`/dtable-server/api/v1/dtables/${U}/rows/`, 'base'],
    [`/dtable-server/api/v1/dtables/${U}/batch-append-rows/`, 'base'],
    [`/dtable-server/api/v1/dtables/${U}/batch-update-rows/`, 'base'],
    [`/dtable-server/api/v1/dtables/${U}/batch-delete-rows/`, 'base'],
    [`/dtable-server/api/v1/dtables/${U}/filtered-rows/`, 'base'],
    [`/dtable-server/api/v1/dtables/${U}/links/`, 'base'],
    [`/dtable-server/api/v1/dtables/${U}/metadata/`, 'base'],
    [`/dtable-server/api/v1/dtables/${U}/columns/`, 'base'],
    [`/dtable-db/api/v1/query/${U}/`, 'base'],
    [`/dtable-db/api/v1/linked-records/${U}/`, 'base'],
    [`/dtable-db/api/v1/insert-rows/${U}/`, 'base'],
    [`/dtable-db/api/v1/base/${U}/links/`, 'base'],
    [`/api-gateway/api/v1/query/${U}/`, 'base'],
    [`/api/v2.1/dtables/${U}/related-users/`, 'account'],
    [`/api/v2.1/dtable-db/query/${U}/`, 'account'],
    [`/api/v2.1/dtables/${U32.toUpperCase()}/metadata/`, 'account'],
  ]
  it.each(cases)('%s is %s, counted per base', (path, cls) => {
    const r = c.classify('GET', path, '1.2.3.4', NOW)
    expect(r.cls).toBe(cls)
    expect(r.key).toBe(`base:${U32}`)
    expect(r.charges[0]!.key).toBe(`{b:${U32}}:${cls}:60000:l2`)
  })

  it('the first UUID segment is the base, whatever follows', () => {
    const other = '11111111-2222-4333-8444-555555555555'
    expect(c.classify('GET', `/api/v2.1/dtables/${U}/rows/${other}/`, '1.2.3.4', NOW).key).toBe(
      `base:${U32}`
    )
  })
})

describe('compilePathPattern: {token} only where asked for', () => {
  it('a rule path takes {token} literally; the history reads it as one segment', () => {
    expect(compilePathPattern('/a/{token}/b').test('/a/xyz/b')).toBe(false)
    expect(compilePathPattern('/a/{token}/b', { token: true }).test('/a/xyz/b/')).toBe(true)
    expect(compilePathPattern('/a/{token}/b', { token: true }).test('/a/x/y/b')).toBe(false)
    expect(
      compilePathPattern('/x/{base_uuid}/*').test('/X/6F1C2A4E0D3B4C599A513E2D7C8B9A10/any/rest')
    ).toBe(true)
  })
})
