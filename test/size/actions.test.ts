import { describe, expect, it } from 'vitest'
import { sizeCheckFor } from '../../src/size/actions.js'
import { listRowsRefusal } from '../../src/size/check.js'

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const H = U.replace(/-/g, '').toUpperCase()
const v2 = (u: string) => `/api-gateway/api/v2/dtables/${u}`
const v1 = (server: string, u: string) => `/${server}/api/v1/dtables/${u}`

// SPEC §4: every path of every API generation by which a client reaches a checked action.
describe('sizeCheckFor: the action table on every generation', () => {
  const cases: [string, string, string | null][] = []
  for (const u of [U, H]) {
    for (const tail of ['', '/']) {
      cases.push(
        ['GET', `${v2(u)}/rows${tail}`, 'list_rows'],
        ['POST', `${v2(u)}/rows${tail}`, 'append_rows'],
        ['PUT', `${v2(u)}/rows${tail}`, 'update_rows'],
        ['DELETE', `${v2(u)}/rows${tail}`, 'delete_rows'],
        ['POST', `${v2(u)}/sql${tail}`, 'sql_list'],
        ['POST', `/dtable-db/api/v1/query/${u}${tail}`, 'sql_list'],
        ['POST', `/api-gateway/api/v1/query/${u}${tail}`, 'sql_list'],
        ['POST', `/api/v2.1/dtable-db/query/${u}${tail}`, 'sql_list']
      )
      for (const server of ['dtable-server', 'api-gateway']) {
        cases.push(
          ['GET', `${v1(server, u)}/rows${tail}`, 'list_rows'],
          ['POST', `${v1(server, u)}/batch-append-rows${tail}`, 'append_rows'],
          ['PUT', `${v1(server, u)}/batch-update-rows${tail}`, 'update_rows'],
          ['DELETE', `${v1(server, u)}/batch-delete-rows${tail}`, 'delete_rows']
        )
      }
    }
  }
  cases.push(
    ['GET', `${v2(U)}/sql`, null],
    ['PATCH', `${v2(U)}/rows/`, null],
    ['GET', `${v2(U)}/rows/extra`, null],
    ['POST', `/api-gateway/api/v2/dtables/not-a-uuid/rows/`, null],
    ['GET', '/api2/repos/', null],
    ['POST', `${v2(U)}/batch-append-rows/`, null],
    ['POST', `${v1('dtable-server', U)}/rows/`, null],
    ['GET', `/dtable-db/api/v1/query/${U}/`, null],
    ['POST', `/dtable-db/api/v1/linked-records/${U}/`, null],
    ['POST', `/api/v2.1/dtables/${U}/sql/`, null],
    ['POST', `/API-GATEWAY/API/V1/DTABLES/${U}/BATCH-APPEND-ROWS/`, 'append_rows']
  )
  it.each(cases)('%s %s → %s', (method, path, name) => {
    expect(sizeCheckFor(method, path)?.name ?? null).toBe(name)
  })

  it('counts the body field the action takes', () => {
    expect(sizeCheckFor('POST', `${v1('api-gateway', U)}/batch-append-rows/`)).toMatchObject({
      field: 'rows',
    })
    expect(sizeCheckFor('PUT', `${v1('dtable-server', U)}/batch-update-rows/`)).toMatchObject({
      field: 'updates',
    })
    expect(sizeCheckFor('DELETE', `${v2(U)}/rows/`)).toMatchObject({ field: 'row_ids' })
    expect(sizeCheckFor('POST', `/api/v2.1/dtable-db/query/${U}/`)).toMatchObject({ counts: 'sql' })
  })
})

describe('listRowsRefusal: the limit query parameter', () => {
  it.each([
    ['?table_name=T&limit=999', 999],
    ['?table_name=T&limit=1000', 1000],
    ['?table_name=T&limit=1001', 1001],
    ['?limit=5&limit=2000', 2000],
  ])('%s counts %i', (q, n) => {
    expect(listRowsRefusal(q, n)).toBeNull()
    expect(listRowsRefusal(q, n - 1)?.count).toBe(n)
  })
  it.each(['', '?', '?table_name=T'])('%s counts nothing', (q) => {
    expect(listRowsRefusal(q, 0)).toBeNull()
  })
  // Issue #15: forms a server's parser reads as 5000 must not pass uncounted.
  it.each([
    '?limit=abc',
    '?limit=',
    '?limit=-5',
    '?limit=%2B5000',
    '?limit=+5000',
    '?limit=5000.0',
    '?limit=5000abc',
    '?limit=5_000',
    '?limit=%EF%BC%95%EF%BC%90%EF%BC%90%EF%BC%90',
    '?limit=0x1388',
    '?limit=5e3',
    '?limit=10&limit=5000.0',
  ])('%s is refused, naming the parameter', (q) => {
    const r = listRowsRefusal(q, 1_000_000)
    expect(r?.status).toBe(400)
    expect(r?.message).toContain('limit')
  })
})
