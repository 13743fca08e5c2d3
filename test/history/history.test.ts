import { describe, expect, it, vi } from 'vitest'
import { ServerVersion } from '../../src/history/server-version.js'
import { upgradeReport } from '../../src/history/report.js'
import { compileHistory, decide, type HistoryPolicy } from '../../src/history/match.js'
import { MemoryReportStore } from '../../src/history/report-store.js'
import { ENTRIES, RELEASES, type HistoryEntry, type Release } from '../../src/history/table.js'
import { compareVersions, parseVersion } from '../../src/history/version.js'
import { systemClock } from '../../src/clock.js'

const U = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const GONE: HistoryPolicy = { removed: 'gone', deprecationHeaders: true }
const index = compileHistory()

function on(server: string | null, method: string, path: string, query = '', policy = GONE) {
  const m = index.match(method, path, query).map((x) => x.entry)
  return decide(index, m, server, policy, { method, path, uuid: U.replace(/-/g, '') })
}

describe('the history table (SPEC §8, from SERVICE.md)', () => {
  it('has every release from 3.5 to 6.2 with its date, newest first in /v1/history order', () => {
    expect(index.releases.map((r) => r.version)).toEqual([
      '6.2',
      '6.1',
      '6.0',
      '5.3',
      '5.2',
      '5.1',
      '5.0',
      '4.4',
      '4.3',
      '4.2',
      '4.1',
      '4.0',
      '3.5',
    ])
    expect(index.releaseDate('5.3')).toBe('2025-06-16')
    for (const r of RELEASES) expect(r.date).toMatch(/^\d{4}-\d{2}-\d{2}$/)
  })

  it('every entry names a release, and ids are unique', () => {
    const versions = new Set(RELEASES.map((r) => r.version))
    for (const e of ENTRIES) expect(versions.has(e.version), e.id).toBe(true)
    expect(new Set(ENTRIES.map((e) => e.id)).size).toBe(ENTRIES.length)
  })
})

describe('parseVersion', () => {
  it.each([
    ['6.2.3', '6.2'],
    ['6.2', '6.2'],
    [' 5.3.0 ', '5.3'],
    ['v4.4.1', '4.4'],
    ['6.2.3-pro', '6.2'],
    ['10.0.1', '10.0'],
  ])('%s → %s', (text, v) => expect(parseVersion(text)).toBe(v))
  it.each(['', '6', 'six', '6.x', null, 6.2, {}])('%j → null', (text) =>
    expect(parseVersion(text)).toBeNull()
  )
  it('compares numerically, not as text', () => {
    expect(compareVersions('10.0', '9.9')).toBeGreaterThan(0)
    expect(compareVersions('6.10', '6.2')).toBeGreaterThan(0)
    expect(compareVersions('5.3', '5.3')).toBe(0)
  })
})

describe('matching (normalised path, case-insensitive, trailing / optional)', () => {
  it.each([
    [
      'GET',
      `/dtable-server/api/v1/dtables/${U}/rows/`,
      '',
      ['dtable-server-deprecated', 'dtable-server-removed'],
    ],
    [
      'POST',
      `/DTABLE-SERVER/api/v1/dtables/${U}/import-csv`,
      '',
      ['csv-import-append-removed', 'dtable-server-deprecated', 'dtable-server-removed'],
    ],
    [
      'PUT',
      `/dtable-server/api/v1/dtables/${U}/comments/`,
      '',
      ['row-comments-removed', 'dtable-server-deprecated', 'dtable-server-removed'],
    ],
    [
      'GET',
      `/dtable-server/api/v1/dtables/${U}/comments/`,
      '',
      ['dtable-server-deprecated', 'dtable-server-removed'],
    ],
    ['POST', `/dtable-db/api/v1/query/${U}/`, '', ['dtable-db-deprecated', 'dtable-db-removed']],
    [
      'GET',
      '/api/v2.1/dtable/share-link-access-token/',
      '?token=x',
      ['share-link-access-token-removed'],
    ],
    [
      'GET',
      '/api/v2.1/external-link-tokens/abc123/access-token',
      '',
      ['external-link-access-token-removed'],
    ],
    ['GET', `/api-gateway/api/v2/dtables/${U}/rows/`, '?order_by=Name', ['list-rows-order-by']],
    ['GET', `/api-gateway/api/v2/dtables/${U}/rows/`, '?direction=up', ['list-rows-order-by']],
    ['GET', `/api-gateway/api/v2/dtables/${U}/rows/`, '?limit=5', []],
    ['GET', `/api-gateway/api/v2/dtables/${U}/metadata/`, '', []],
    ['POST', '/api/v2.1/external-link-tokens/abc123/access-token/', '', []],
    ['GET', '/api/v2.1/dtable/share-link-access-tokenx/', '', []],
  ])('%s %s%s → %j', (method, path, query, ids) => {
    expect(index.match(method, path, query).map((m) => m.entry.id)).toEqual(ids)
  })

  it('leaves a body condition open for the request path (archive-view without view_name)', () => {
    const m = index.match('POST', `/api/v1/dtables/${U}/archive-view/`, '')
    expect(m).toEqual([expect.objectContaining({ bodyWithout: 'view_name' })])
  })
})

describe('decide: what a call means on a server of each version', () => {
  const rows = `/dtable-server/api/v1/dtables/${U}/rows/`
  it('5.1: forwarded plainly; breaks at 5.3 (report)', () => {
    const d = on('5.1', 'GET', rows)
    expect(d.gone).toBeNull()
    expect(d.headers).toBeNull()
    expect(d.breaking.map((e) => e.id)).toEqual(['dtable-server-removed'])
  })
  it('5.2: deprecated: Deprecation at the release date (00:00 UTC) and the successor', () => {
    const d = on('5.2', 'GET', rows)
    expect(d.headers).toEqual({
      deprecation: `@${Date.parse('2025-02-25T00:00:00Z') / 1000}`,
      link: `</api-gateway/api/v2/dtables/${U.replace(/-/g, '')}/>; rel="successor-version"`,
      sunset: 'Mon, 16 Jun 2025 00:00:00 GMT',
    })
  })
  it('5.3 and later: 410 naming the endpoint, the version, its date and the replacement', () => {
    for (const v of ['5.3', '6.2']) {
      const d = on(v, 'GET', rows)
      expect(d.gone?.entry.id).toBe('dtable-server-removed')
      expect(d.gone?.message).toBe(
        `GET ${rows} was removed in 5.3 (2025-06-16): The /dtable-server/ API; use /api-gateway/api/v2/dtables/{base_uuid}/...`
      )
      expect(d.breaking).toEqual([])
    }
  })
  it('removed: pass forwards a removed endpoint, without deprecation headers', () => {
    const d = on('6.2', 'GET', rows, '', { removed: 'pass', deprecationHeaders: true })
    expect(d.gone).toBeNull()
    expect(d.headers).toBeNull()
  })
  it('deprecation_headers: false leaves them off', () => {
    expect(
      on('5.2', 'GET', rows, '', { removed: 'gone', deprecationHeaders: false }).headers
    ).toBeNull()
  })
  it('the earliest removal names the call (CSV import: 3.5, before the whole API in 5.3)', () => {
    expect(on('6.2', 'POST', `/dtable-server/api/v1/dtables/${U}/import-csv/`).gone?.entry.id).toBe(
      'csv-import-append-removed'
    )
  })
  it('unknown version: no 410, no headers; every breaking entry counts', () => {
    const d = on(null, 'POST', `/dtable-server/api/v1/dtables/${U}/import-csv/`)
    expect(d.gone).toBeNull()
    expect(d.headers).toBeNull()
    expect(d.breaking.map((e) => e.id)).toEqual([
      'csv-import-append-removed',
      'dtable-server-removed',
    ])
  })
  it('a changed request is forwarded unchanged and reported when the server is older', () => {
    expect(
      on('4.3', 'GET', `/api-gateway/api/v2/dtables/${U}/rows/`, '?order_by=x').breaking.map(
        (e) => e.id
      )
    ).toEqual(['list-rows-order-by'])
    expect(on('4.4', 'GET', `/api-gateway/api/v2/dtables/${U}/rows/`, '?order_by=x')).toMatchObject(
      { gone: null, breaking: [] }
    )
  })
})

describe('adding a release is adding rows', () => {
  it('a 6.3 that removes an endpoint: matched, 410 on 6.3, reported from 6.2', async () => {
    const releases: Release[] = [
      { version: '6.3', date: '2027-01-15', breaking: ['Old Thing removed'], changes: [] },
      ...RELEASES,
    ]
    const entries: HistoryEntry[] = [
      ...ENTRIES,
      {
        id: 'old-thing-removed',
        version: '6.3',
        kind: 'removed',
        what: 'Old Thing',
        replacement: '/api/v2.1/new-thing/',
        recognise: [{ methods: ['GET'], path: '/api/v2.1/old-thing/' }],
      },
    ]
    const idx = compileHistory(entries, releases)
    expect(idx.releases[0]!.version).toBe('6.3')
    const m = idx.match('GET', '/api/v2.1/old-thing', '').map((x) => x.entry)
    expect(
      decide(idx, m, '6.3', GONE, { method: 'GET', path: '/api/v2.1/old-thing', uuid: null }).gone
        ?.message
    ).toContain('removed in 6.3 (2027-01-15): Old Thing; use /api/v2.1/new-thing/')
    const d = decide(idx, m, '6.2', GONE, {
      method: 'GET',
      path: '/api/v2.1/old-thing',
      uuid: null,
    })
    const store = new MemoryReportStore()
    await store.add(
      new Map([
        [d.breaking[0]!.id, { calls: 3, lastSeenMs: 1_000, keys: new Map([['ip:1.2.3.4', 3]]) }],
      ]),
      { instance: 'test', seq: 1 }
    )
    const report = await upgradeReport(idx, store, '6.2', '6.3', 1_000)
    expect(report.entries).toEqual([
      expect.objectContaining({ id: 'old-thing-removed', version: '6.3', calls: 3 }),
    ])
  })
})

// Issue #25: while `auto` has no answer (a server still starting), ask again within seconds,
// not after 10 minutes.
describe('ServerVersion: asks again soon while unknown', () => {
  it('retries after 1, 2, 4 s, then polls at pollMs once known', async () => {
    vi.useFakeTimers()
    try {
      const answers: (string | null)[] = [null, null, null, '6.2']
      const asked: number[] = []
      const logger = { warn: () => {}, info: () => {} } as never
      const sv = new ServerVersion({
        clock: systemClock,
        configured: () => 'auto',
        upstreamUrl: 'http://x',
        logger,
        pollMs: 600_000,
        fetch: async () => {
          asked.push(Date.now())
          return answers.length > 0 ? answers.shift()! : '6.2'
        },
      })
      const t0 = Date.now()
      sv.start()
      for (let i = 0; i < 20; i++) await vi.advanceTimersByTimeAsync(500)
      expect(asked.map((t) => t - t0)).toEqual([0, 1000, 3000, 7000])
      expect(sv.current()).toBe('6.2')
      await vi.advanceTimersByTimeAsync(600_000)
      expect(asked).toHaveLength(5)
      sv.stop()
    } finally {
      vi.useRealTimers()
    }
  })
})
