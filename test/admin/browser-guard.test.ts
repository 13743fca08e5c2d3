import { describe, expect, it } from 'vitest'
import { crossSiteReason } from '../../src/admin/browser-guard.js'

// SPEC §7 (issue #31 item 5): which admin calls a browser marks as sent from another site.

describe('crossSiteReason', () => {
  const host = '127.0.0.1:9090'
  it.each([
    ['POST', { origin: 'http://evil.example', host }, /Origin/],
    ['PUT', { origin: 'http://127.0.0.1:9091', host }, /Origin/],
    ['DELETE', { origin: 'null', host }, /Origin null/],
    ['POST', { secFetchSite: 'cross-site', host }, /cross-site/],
    ['POST', { secFetchSite: 'Same-Site', origin: `http://${host}`, host }, /same-site/],
    ['POST', { origin: 'http://127.0.0.1:9090' }, /Origin/], // no Host to compare with
  ])('%s %j is refused', (method, headers, reason) => {
    expect(crossSiteReason(method, headers)).toMatch(reason)
  })

  it.each([
    ['GET', { origin: 'http://evil.example', secFetchSite: 'cross-site', host }],
    ['POST', { origin: `http://${host}`, host }],
    ['POST', { origin: 'HTTP://127.0.0.1:9090', secFetchSite: 'same-origin', host }],
    ['POST', { secFetchSite: 'none', host }],
    ['DELETE', { host }],
  ])('%s %j passes', (method, headers) => {
    expect(crossSiteReason(method, headers)).toBeNull()
  })
})
