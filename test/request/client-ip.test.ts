import { describe, expect, it } from 'vitest'
import { createClientIpResolver } from '../../src/request/client-ip.js'

const noProxies = createClientIpResolver({ trustedProxies: [], ipv6Prefix: 64 })
const behindLb = createClientIpResolver({
  trustedProxies: ['10.0.0.0/8', '192.168.1.1', 'fd00::/8'],
  ipv6Prefix: 64,
})

describe('clientIp (SPEC §6)', () => {
  it('is the peer when no proxy is trusted, whatever X-Forwarded-For says', () => {
    expect(noProxies.clientIp('203.0.113.9', '1.2.3.4')).toBe('203.0.113.9')
    expect(noProxies.clientIp('::ffff:203.0.113.9', '1.2.3.4')).toBe('203.0.113.9')
  })

  it.each([
    ['10.1.1.1', '198.51.100.7', '198.51.100.7'],
    ['10.1.1.1', '1.1.1.1, 198.51.100.7', '198.51.100.7'],
    ['10.1.1.1', '198.51.100.7, 10.2.2.2', '198.51.100.7'],
    ['10.1.1.1', '198.51.100.7, 192.168.1.1, 10.2.2.2', '198.51.100.7'],
    ['10.1.1.1', '10.9.9.9, 10.2.2.2', '10.9.9.9'],
    ['10.1.1.1', undefined, '10.1.1.1'],
    ['::ffff:10.1.1.1', '::ffff:198.51.100.7', '198.51.100.7'],
    ['10.1.1.1', 'garbage, 10.2.2.2', '10.2.2.2'],
    ['203.0.113.5', '198.51.100.7', '203.0.113.5'],
    ['fd00::1', '2001:db8::5', '2001:db8::5'],
    // Issue #39 item 5: a hop is read as strictly as a configuration's CIDRs. `010.9.9.9` is not
    // 8.9.9.9, `0x0a.0.0.1` not 10.0.0.1, `10.1` not 10.0.0.1, a zone id is not an address:
    // each ends the walk, and the last address basegate could vouch for is the client.
    ['10.1.1.1', '010.9.9.9', '10.1.1.1'],
    ['10.1.1.1', '0x0a.0.0.1, 10.2.2.2', '10.2.2.2'],
    ['10.1.1.1', '10.1', '10.1.1.1'],
    ['fd00::1', 'fe80::1%eth0', 'fd00::1'],
    ['10.1.1.1', ' 198.51.100.7 ', '198.51.100.7'],
  ])('peer %s with XFF %s → %s', (peer, xff, expected) => {
    expect(behindLb.clientIp(peer, xff)).toBe(expected)
  })

  it('reads several XFF headers as one list', () => {
    expect(behindLb.clientIp('10.1.1.1', ['198.51.100.7', '10.2.2.2'])).toBe('198.51.100.7')
  })
})

describe('keyOf: IPv6 grouped by prefix', () => {
  it('groups a /64', () => {
    expect(noProxies.keyOf('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64')
    expect(noProxies.keyOf('2001:db8:1:2:bbbb::9')).toBe('2001:db8:1:2::/64')
    expect(noProxies.keyOf('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64')
  })
  it('honours another prefix, and leaves IPv4 alone', () => {
    const r = createClientIpResolver({ trustedProxies: [], ipv6Prefix: 48 })
    expect(r.keyOf('2001:db8:1:2::1')).toBe('2001:db8:1::/48')
    expect(r.keyOf('198.51.100.7')).toBe('198.51.100.7')
    expect(
      createClientIpResolver({ trustedProxies: [], ipv6Prefix: 128 }).keyOf('2001:db8::1')
    ).toBe('2001:db8::1')
  })
})
