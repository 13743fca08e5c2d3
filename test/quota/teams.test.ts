import { FakeClock } from '../helpers/clock.js'
import { describe, expect, it } from 'vitest'
import { parseTeamChange } from '../../src/admin/teams.js'
import { configView } from '../../src/config/view.js'
import { maskUrl } from '../../src/mask-url.js'
import { parseConfig } from '../../src/config/load.js'
import { compileClassifier } from '../../src/http/classify.js'
import { effectiveTeams, quotaOf, teamsByBase } from '../../src/quota/teams.js'
import { UsageSummary } from '../../src/observe/summary.js'

const A = '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10'
const A32 = A.replace(/-/g, '')
const B = '11111111-0d3b-4c59-9a51-3e2d7c8b9a10'
const B32 = B.replace(/-/g, '')

function config(extra = '') {
  const r = parseConfig(
    `monthly:
  enabled: true
  timezone: Europe/Berlin
  teams:
    - { id: acme, plan: plus, users: 12, bases: [${A}] }
    - { id: solo, plan: free, bases: [${B}] }
${extra}`,
    {}
  )
  if (!r.ok) throw new Error(JSON.stringify(r.problems))
  return r.config
}

describe('quota maths (SPEC §5)', () => {
  it('is the plan calls, or calls_per_user × users', () => {
    expect(quotaOf({ calls: 3000 }, 7)).toBe(3000)
    expect(quotaOf({ callsPerUser: 10000 }, 12)).toBe(120000)
    expect(quotaOf({ callsPerUser: 50000 }, 1)).toBe(50000)
    expect(quotaOf(undefined, 5)).toBe(0)
  })

  it('file teams with overrides over them; a raised plan or user count raises the quota', () => {
    const c = config()
    expect(effectiveTeams(c, new Map()).map((t) => [t.id, t.quota, t.changed])).toEqual([
      ['acme', 120000, false],
      ['solo', 3000, false],
    ])
    const t = effectiveTeams(
      c,
      new Map([
        ['acme', { users: 20 }],
        ['solo', { plan: 'enterprise' }],
        ['ghost', { users: 9 }],
      ])
    )
    expect(t.map((x) => [x.id, x.plan, x.users, x.quota, x.changed])).toEqual([
      ['acme', 'plus', 20, 200000, true],
      ['solo', 'enterprise', 1, 50000, true],
    ])
  })

  it('maps each base to its team; moving a base moves its charges', () => {
    const c = config()
    const byBase = teamsByBase(effectiveTeams(c, new Map([['solo', { bases: [B32, A32] }]])))
    expect(byBase.get(A32)?.id).toBe('acme') // the first team listing a base keeps it
    expect(byBase.get(B32)?.id).toBe('solo')
  })
})

describe('classify with monthly quotas', () => {
  const c = config()
  const cls = compileClassifier(c, teamsByBase(effectiveTeams(c, new Map())))
  const now = Date.parse('2026-11-22T10:00:00Z')

  it("charges base and account calls on a team base to the team month; rate keys stay the base's", () => {
    const gw = cls.classify('GET', `/api-gateway/api/v2/dtables/${A}/rows/`, '1.1.1.1', now)
    const m = gw.charges.at(-1)!
    expect(m).toMatchObject({
      kind: 'monthly',
      team: 'acme',
      limit: 120000,
      key: '{t:acme}:ledger:2026-11',
      quotaKey: '{t:acme}:team',
      day: '22',
      month: '2026-11',
    })
    if (m.kind !== 'monthly') throw new Error('the last charge is the month')
    expect(m.endMs).toBe(Date.parse('2026-11-30T23:00:00Z')) // Berlin midnight, 1 December
    // Issue #11: the rate keys do not depend on the team (a move keeps the counts).
    for (const ch of gw.charges.slice(0, -1)) expect(ch.key.startsWith(`{b:${A32}}`)).toBe(true)
    const acct = cls.classify('GET', `/api/v2.1/dtables/${A}/`, '1.1.1.1', now)
    expect(acct.charges.at(-1)!.kind).toBe('monthly')
  })

  it('does not charge bases in no team, per-IP calls, or other classes', () => {
    const other = '22222222-0d3b-4c59-9a51-3e2d7c8b9a10'
    expect(
      cls
        .classify('GET', `/api-gateway/api/v2/dtables/${other}/rows/`, '1.1.1.1', now)
        .charges.some((x) => x.kind === 'monthly')
    ).toBe(false)
    expect(
      cls.classify('GET', '/api2/repos/', '1.1.1.1', now).charges.some((x) => x.kind === 'monthly')
    ).toBe(false)
    expect(cls.classify('GET', `/web/dtables/${A}/`, '1.1.1.1', now).charges).toEqual([])
  })

  it('charges nothing monthly when monthly is off', () => {
    const off = parseConfig(
      `monthly: { enabled: false, teams: [ { id: acme, plan: plus, users: 2, bases: [${A}] } ] }`,
      {}
    )
    if (!off.ok) throw new Error('bad')
    const c2 = compileClassifier(off.config, teamsByBase(effectiveTeams(off.config, new Map())))
    expect(
      c2
        .classify('GET', `/api-gateway/api/v2/dtables/${A}/rows/`, '1.1.1.1', now)
        .charges.map((x) => x.kind)
    ).toEqual(['class'])
  })
})

describe('PUT /v1/teams body', () => {
  const c = config()
  const teams = effectiveTeams(c, new Map())
  it.each([
    [{ users: 20 }, { users: 20 }],
    [
      { plan: 'enterprise', bases: [A.toUpperCase()] },
      { plan: 'enterprise', bases: [A32] },
    ],
    [{}, {}],
  ])('accepts %j', (body, change) => {
    expect(parseTeamChange(body, c.monthly.plans, teams, 'acme')).toEqual({ change })
  })
  it.each([
    [[1], 'must be a JSON object'],
    [{ plan: 'gold' }, 'plan: "gold" is not a plan'],
    [{ users: 0 }, 'users: 0 is not a whole number from 1 to 1000000'],
    [{ users: 2.5 }, 'users: 2.5'],
    [{ bases: 'x' }, 'bases: must be a list'],
    [{ bases: ['nope'] }, 'bases: "nope" is not a base UUID'],
    [{ bases: [B] }, 'belongs to team "solo"'],
    [{ quota: 5 }, 'quota: is not a known field'],
  ])('refuses %j', (body, message) => {
    const r = parseTeamChange(body, c.monthly.plans, teams, 'acme')
    expect('error' in r && r.error).toContain(message)
  })
})

describe('masking secrets in /v1/config', () => {
  it('hides tokens and passwords', () => {
    expect(maskUrl('redis://:s3cret@redis:6379/0')).not.toContain('s3cret')
    expect(maskUrl('redis://user:s3cret@redis:6379')).not.toContain('s3cret')
    expect(maskUrl('redis://redis:6379')).toBe('redis://redis:6379')
    const r = parseConfig('admin: { token: tok-123 }\nstore: { url: "redis://:pw-456@r:6379" }', {})
    if (!r.ok) throw new Error('bad')
    const text = JSON.stringify(configView(r.config))
    expect(text).not.toContain('tok-123')
    expect(text).not.toContain('pw-456')
    expect(text).toContain('500/min')
  })
})

describe('usage summary', () => {
  it('lists the busiest keys and the teams past 80 % and 100 %', () => {
    const s = new UsageSummary(new FakeClock(0), 2, 100)
    for (let i = 0; i < 5; i++) s.record('base:a')
    for (let i = 0; i < 3; i++) s.record('ip:1.1.1.1')
    s.record('base:b')
    s.recordMonthly('acme', 85, 100)
    s.recordMonthly('solo', 3000, 3000)
    s.recordMonthly('calm', 10, 100)
    const line = s.flush(60_000)
    expect(line).toMatchObject({
      interval_s: 60,
      requests: 9,
      busiest: [
        { key: 'base:a', calls: 5 },
        { key: 'ip:1.1.1.1', calls: 3 },
      ],
    })
    expect(line.teams_over_80).toEqual([{ team: 'acme', used: 85, quota: 100, percent: 85 }])
    expect(line.teams_over_100).toEqual([{ team: 'solo', used: 3000, quota: 3000, percent: 100 }])
    expect(s.flush(120_000).requests).toBe(0)
  })

  it('stays bounded under a key-space flood', () => {
    const s = new UsageSummary(new FakeClock(0), 10, 1000)
    for (let i = 0; i < 50_000; i++) s.record(`ip:${i}`)
    expect(s.flush(1).requests).toBe(50_000)
    expect((s as unknown as { calls: Map<string, number> }).calls.size).toBe(0)
  })
})
