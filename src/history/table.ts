// SPEC §8: the service's API change history, from SERVICE.md ("Change history of the API"),
// as data. Every behaviour of §8 (410s, Deprecation headers, the upgrade report,
// /v1/history) reads these two tables and nothing else: adding a release is adding rows.

export interface Release {
  version: string
  /** Release date, YYYY-MM-DD. */
  date: string
  /** What the release broke, in words (for /v1/history). */
  breaking: readonly string[]
  /** Other changes. */
  changes: readonly string[]
}

/** How a request is recognised: method, whole path pattern, and optionally its query or body. */
export interface Recognise {
  /** Upper-case methods; null for any. */
  methods: readonly string[] | null
  /**
   * Path pattern as in rules (SPEC §3): `{base_uuid}` is a base UUID, `{token}` one path
   * segment, `*` at the end any rest; trailing `/` optional; matched case-insensitively on the
   * normalised path.
   */
  path: string
  /** The call matches only with one of these query parameters. */
  anyQuery?: readonly string[]
  /** The call matches only when its JSON body lacks this field. */
  bodyWithout?: string
}

export interface HistoryEntry {
  id: string
  /** The release that removed, deprecated or changed it. */
  version: string
  kind: 'removed' | 'deprecated' | 'changed'
  /** What changed, in words. */
  what: string
  /** The endpoint to use instead, where there is one. */
  replacement: string | null
  recognise: readonly Recognise[]
}

const GATEWAY = '/api-gateway/api/v2/dtables/{base_uuid}/...'

/** Every release of SERVICE.md's history, newest first. */
export const RELEASES: readonly Release[] = [
  {
    version: '6.2',
    date: '2026-07-21',
    breaking: ['Get Team Info: field scripts_running_total renamed scripts_running_limit'],
    changes: [
      'Create Row Comment (POST, base operation)',
      'hours() in SQL',
      'Get File Download Link: 404 (was 400) for a missing file',
    ],
  },
  {
    version: '6.1',
    date: '2026-03-19',
    breaking: [
      'Get Base-Token with External-Link removed: GET /api/v2.1/external-link-tokens/{token}/access-token/',
    ],
    changes: [
      'admin requests (audit/virus/statistics lists)',
      'monthly_automation_limit_per_user on Update User/Team',
      'is_active, is_org_admin on Get User (Team Admin)',
      'filters on List Team Operations and Team Logins',
    ],
  },
  {
    version: '6.0',
    date: '2025-11-04',
    breaking: [
      'Move Rows to Big Data (POST /api/v1/dtables/{u}/archive-view/) takes view_name instead of a raw SQL query',
    ],
    changes: [
      'enable_force_sso_login',
      'exp on both base-token requests',
      'List Group Member Audit Logs',
      'Delete SAML Config',
    ],
  },
  {
    version: '5.3',
    date: '2025-06-16',
    breaking: [
      '/dtable-server/… and /dtable-db/… removed; their functions moved to /api-gateway/…',
    ],
    changes: ['List/Update/Delete Virus Files'],
  },
  {
    version: '5.2',
    date: '2025-02-25',
    breaking: [],
    changes: ['/dtable-server/… and /dtable-db/… deprecated', 'Duplicate Table'],
  },
  { version: '5.1', date: '2024-11-08', breaking: [], changes: ['Repair Base', 'List Audit Logs'] },
  {
    version: '5.0',
    date: '2024-07-15',
    breaking: [
      'Link columns return [{display_value, row_id}]',
      "Link Formula returns its result's type",
    ],
    changes: [
      'Get Row / List Rows return every column (null when undefined)',
      'SQL parameters',
      'gateway endpoints recommended',
    ],
  },
  {
    version: '4.4',
    date: '2024-05-15',
    breaking: [
      'data-collection-table calls removed',
      'Get Row no longer returns _mtime, _ctime',
      'List Rows loses order_by, direction',
    ],
    changes: ['/api-gateway/ introduced', 'gateway returns the x-ratelimit-* headers'],
  },
  {
    version: '4.3',
    date: '2024-02-08',
    breaking: [],
    changes: [
      'big-data row links (POST/DELETE /dtable-db/api/v1/base/{u}/links/)',
      'Update Team User',
      'team login and SAML requests',
      'Search User',
      'export with or without assets',
    ],
  },
  {
    version: '4.2',
    date: '2023-11-22',
    breaking: [],
    changes: [
      'Python Scheduler calls',
      'export base',
      'items search',
      'app status',
      'deprecated export calls removed',
    ],
  },
  {
    version: '4.1',
    date: '2023-08-23',
    breaking: [],
    changes: [
      'add user to several groups',
      'unknown select options created',
      'stricter row type checks',
      'row_id immutable in Update Row',
      'filter validation for List Rows with SQL',
    ],
  },
  {
    version: '4.0',
    date: '2023-06-27',
    breaking: [
      'Base-Token with Invite-Link removed: GET /api/v2.1/dtable/share-link-access-token/',
    ],
    changes: ['Bearer authentication', 'team, logo, universal-app and custom-folder requests'],
  },
  {
    version: '3.5',
    date: '2023-04-12',
    breaking: [
      'CSV import/append (POST /dtable-server/api/v1/dtables/{u}/import-csv/, /append-csv/) replaced',
      'row comment create/update (POST, PUT /dtable-server/api/v1/dtables/{u}/comments/) removed',
    ],
    changes: [],
  },
]

/** The entries a request can be recognised by. */
export const ENTRIES: readonly HistoryEntry[] = [
  {
    id: 'csv-import-append-removed',
    version: '3.5',
    kind: 'removed',
    what: 'CSV import and append (POST /dtable-server/api/v1/dtables/{base_uuid}/import-csv/, /append-csv/)',
    replacement: null,
    recognise: [
      { methods: ['POST'], path: '/dtable-server/api/v1/dtables/{base_uuid}/import-csv/' },
      { methods: ['POST'], path: '/dtable-server/api/v1/dtables/{base_uuid}/append-csv/' },
    ],
  },
  {
    id: 'row-comments-removed',
    version: '3.5',
    kind: 'removed',
    what: 'Row comment create and update (POST, PUT /dtable-server/api/v1/dtables/{base_uuid}/comments/)',
    replacement: null,
    recognise: [
      { methods: ['POST', 'PUT'], path: '/dtable-server/api/v1/dtables/{base_uuid}/comments/' },
    ],
  },
  {
    id: 'share-link-access-token-removed',
    version: '4.0',
    kind: 'removed',
    what: 'Get Base-Token with Invite-Link (GET /api/v2.1/dtable/share-link-access-token/)',
    replacement: null,
    recognise: [{ methods: ['GET'], path: '/api/v2.1/dtable/share-link-access-token/' }],
  },
  {
    id: 'list-rows-order-by',
    version: '4.4',
    kind: 'changed',
    what: 'List Rows no longer takes order_by or direction',
    replacement: null,
    recognise: [
      {
        methods: ['GET'],
        path: '/dtable-server/api/v1/dtables/{base_uuid}/rows/',
        anyQuery: ['order_by', 'direction'],
      },
      {
        methods: ['GET'],
        path: '/api-gateway/api/v2/dtables/{base_uuid}/rows/',
        anyQuery: ['order_by', 'direction'],
      },
    ],
  },
  {
    id: 'dtable-server-deprecated',
    version: '5.2',
    kind: 'deprecated',
    what: 'The /dtable-server/ API',
    replacement: GATEWAY,
    recognise: [{ methods: null, path: '/dtable-server/*' }],
  },
  {
    id: 'dtable-db-deprecated',
    version: '5.2',
    kind: 'deprecated',
    what: 'The /dtable-db/ API',
    replacement: GATEWAY,
    recognise: [{ methods: null, path: '/dtable-db/*' }],
  },
  {
    id: 'dtable-server-removed',
    version: '5.3',
    kind: 'removed',
    what: 'The /dtable-server/ API',
    replacement: GATEWAY,
    recognise: [{ methods: null, path: '/dtable-server/*' }],
  },
  {
    id: 'dtable-db-removed',
    version: '5.3',
    kind: 'removed',
    what: 'The /dtable-db/ API',
    replacement: GATEWAY,
    recognise: [{ methods: null, path: '/dtable-db/*' }],
  },
  {
    id: 'archive-view-raw-sql',
    version: '6.0',
    kind: 'changed',
    what: 'Move Rows to Big Data takes view_name instead of a raw SQL query',
    replacement: null,
    recognise: [
      {
        methods: ['POST'],
        path: '/api/v1/dtables/{base_uuid}/archive-view/',
        bodyWithout: 'view_name',
      },
    ],
  },
  {
    id: 'external-link-access-token-removed',
    version: '6.1',
    kind: 'removed',
    what: 'Get Base-Token with External-Link (GET /api/v2.1/external-link-tokens/{token}/access-token/)',
    replacement: null,
    recognise: [{ methods: ['GET'], path: '/api/v2.1/external-link-tokens/{token}/access-token/' }],
  },
]
