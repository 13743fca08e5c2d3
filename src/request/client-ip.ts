import ipaddr from 'ipaddr.js'
import type { ConfigProblem } from '../types.js'

// SPEC §6: who the client is. Built once per configuration; `clientKey` runs per request.

type Addr = ipaddr.IPv4 | ipaddr.IPv6
type Cidr = [Addr, number]

export interface ClientIpOptions {
  trustedProxies: readonly string[]
  ipv6Prefix: number
}

/**
 * An address as a configuration may name it: four plain decimal parts for IPv4 (ipaddr.js also
 * reads `010.0.0.1` as octal 8.0.0.1, and `10.1` as 10.0.0.1, which no operator means), IPv6
 * without a zone (`fe80::1%eth0` names an interface of one host, not a network).
 */
export function isStrictAddress(text: string): boolean {
  if (text.includes('%')) return false
  if (!text.includes(':')) return ipaddr.IPv4.isValidFourPartDecimal(text)
  if (!ipaddr.IPv6.isValid(text)) return false
  const v4tail = /[.]/.test(text) ? text.slice(text.lastIndexOf(':') + 1) : null
  return v4tail === null || ipaddr.IPv4.isValidFourPartDecimal(v4tail)
}

/** A CIDR (or a lone address) as a configuration may name it: a strict address, a plain prefix length. */
export function isStrictCidr(text: string): boolean {
  const slash = text.indexOf('/')
  if (slash === -1) return isStrictAddress(text)
  const addr = text.slice(0, slash)
  const bits = text.slice(slash + 1)
  if (!/^(0|[1-9][0-9]{0,2})$/.test(bits) || !isStrictAddress(addr)) return false
  return Number(bits) <= (addr.includes(':') ? 128 : 32)
}

/** `::ffff:a.b.c.d` becomes `a.b.c.d`; null for anything that is not an address. */
function parse(text: string): Addr | null {
  const t = text.trim()
  if (!ipaddr.isValid(t)) return null
  return ipaddr.process(t)
}

/**
 * An address written by someone else (an X-Forwarded-For hop), read as strictly as a
 * configuration's: `010.9.9.9`, `0x0a.0.0.1`, `10.1` and zone ids are not addresses (ipaddr.js
 * would read them as 8.9.9.9, 10.0.0.1, 10.0.0.1 and keep the zone); null for those.
 */
function parseStrict(text: string): Addr | null {
  const t = text.trim()
  return isStrictAddress(t) ? ipaddr.process(t) : null
}

/** A socket's peer address as SPEC §6 reads it: `::ffff:a.b.c.d` is `a.b.c.d` (one place for it). */
export function peerAddress(remote: string | undefined): string {
  const a = remote ?? ''
  return a.startsWith('::ffff:') && a.includes('.') ? a.slice(7) : a
}

function parseCidr(text: string): Cidr {
  if (text.includes('/')) {
    const [addr, bits] = ipaddr.parseCIDR(text)
    // A v4-mapped CIDR would never match the unwrapped v4 client; unwrap it too.
    if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
      return [(addr as ipaddr.IPv6).toIPv4Address(), bits - 96]
    }
    return [addr, bits]
  }
  const addr = ipaddr.process(text)
  return [addr, addr.kind() === 'ipv4' ? 32 : 128]
}

/** A matcher for a CIDR list (SPEC §2 allow.clients); an empty list matches nothing. */
export function cidrMatcher(list: readonly string[]): (ip: string) => boolean {
  if (list.length === 0) return () => false
  const cidrs = list.map(parseCidr)
  return (ip) => {
    const a = parse(ip)
    return a !== null && cidrs.some(([net, bits]) => a.kind() === net.kind() && a.match(net, bits))
  }
}

/** The address's first `bits` bits, as a map key (kind, length and the masked bytes). */
function prefixKey(a: Addr, bits: number): string {
  const bytes = a.toByteArray()
  let key = `${a.kind()}/${bits}:`
  for (let i = 0; i < bytes.length; i++) {
    const left = bits - i * 8
    const mask = left >= 8 ? 0xff : left <= 0 ? 0 : (0xff << (8 - left)) & 0xff
    key += (bytes[i]! & mask).toString(16) + '.'
  }
  return key
}

const CACHE_MAX = 10_000

/**
 * SPEC §10 `clients`: which of many CIDR lists (in order) first holds an address, at the cost
 * of one parse and one map lookup per prefix length in use, not one match per CIDR; answers are
 * remembered per address (10,000 at most, then forgotten at once). -1: none.
 */
export function firstCidrList(lists: readonly (readonly string[])[]): (ip: string) => number {
  const byKey = new Map<string, number>()
  const lengths = new Map<string, [string, number]>()
  lists.forEach((list, index) => {
    for (const text of list) {
      const [net, bits] = parseCidr(text)
      const key = prefixKey(net, bits)
      if (!byKey.has(key)) byKey.set(key, index)
      lengths.set(`${net.kind()}/${bits}`, [net.kind(), bits])
    }
  })
  const shapes = [...lengths.values()]
  const cache = new Map<string, number>()
  return (ip) => {
    const known = cache.get(ip)
    if (known !== undefined) return known
    const a = parse(ip)
    let first = -1
    if (a !== null) {
      for (const [kind, bits] of shapes) {
        if (kind !== a.kind()) continue
        const i = byKey.get(prefixKey(a, bits))
        if (i !== undefined && (first === -1 || i < first)) first = i
      }
    }
    if (cache.size >= CACHE_MAX) cache.clear()
    cache.set(ip, first)
    return first
  }
}

export interface ClientIpResolver {
  /** The client's address, as text (IPv4 dotted, IPv6 compact). */
  clientIp(peer: string | undefined, xff: string | string[] | undefined): string
  /** Whether a socket's peer is one of client_ip.trusted_proxies (its connections carry many clients). */
  isTrusted(peer: string | undefined): boolean
  /** The key that counts this client: the address, or its IPv6 /prefix. */
  keyOf(ip: string): string
}

export function createClientIpResolver(opts: ClientIpOptions): ClientIpResolver {
  const cidrs = opts.trustedProxies.map(parseCidr)
  const trusted = (a: Addr): boolean =>
    cidrs.some(([net, bits]) => a.kind() === net.kind() && a.match(net, bits))
  const hasTrusted = cidrs.length > 0

  function clientIp(peerText: string | undefined, xff: string | string[] | undefined): string {
    // Hot path: no trusted proxies, so the peer is the client; skip the full parse.
    if (!hasTrusted && peerText !== undefined) {
      const peer = peerAddress(peerText)
      if (!peer.includes(':')) return peer
    }
    const peer = peerText === undefined ? null : parse(peerText)
    if (peer === null) return peerText ?? 'unknown'
    if (!hasTrusted || !trusted(peer) || xff === undefined) return peer.toString()
    // Walk X-Forwarded-For from the right, skipping trusted hops; the first untrusted is the
    // client; if every hop is trusted, the leftmost.
    const hops = (Array.isArray(xff) ? xff.join(',') : xff).split(',')
    let nearest: Addr = peer
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = parseStrict(hops[i]!)
      // A hop that is not an address was written by something we cannot vouch for: the last
      // address we could vouch for is the client.
      if (hop === null) return nearest.toString()
      if (!trusted(hop)) return hop.toString()
      nearest = hop
    }
    return nearest.toString()
  }

  function keyOf(ip: string): string {
    if (!ip.includes(':')) return ip
    const addr = parse(ip)
    if (addr === null || addr.kind() !== 'ipv6' || opts.ipv6Prefix >= 128) return ip
    // Group IPv6 clients by prefix: one subscriber usually holds a whole /64.
    const bytes = addr.toByteArray()
    const keep = opts.ipv6Prefix
    for (let bit = keep; bit < 128; bit++) {
      const idx = bit >> 3
      bytes[idx] = bytes[idx]! & ~(0x80 >> (bit & 7))
    }
    return `${ipaddr.fromByteArray(bytes).toString()}/${keep}`
  }

  function isTrusted(peerText: string | undefined): boolean {
    if (!hasTrusted || peerText === undefined) return false
    const peer = parse(peerText)
    return peer !== null && trusted(peer)
  }

  return { clientIp, keyOf, isTrusted }
}

/** Every entry of a CIDR list a configuration names, checked strictly; problems name the entry. */
export function checkCidrs(
  problems: ConfigProblem[],
  field: string,
  list: readonly string[]
): void {
  list.forEach((cidr, i) => {
    if (!isStrictCidr(cidr)) {
      problems.push({
        field: `${field}[${i}]`,
        message: `${JSON.stringify(cidr)} is not an IP address or CIDR`,
      })
      return
    }
    const network = networkOf(cidr)
    if (network !== null)
      problems.push({
        field: `${field}[${i}]`,
        message: `${JSON.stringify(cidr)} has bits set past its prefix: write its network, ${network}`,
      })
  })
}

/** The network a CIDR with host bits set names (`1.2.3.4/8` → `1.0.0.0/8`); null when it has none. */
function networkOf(cidr: string): string | null {
  const slash = cidr.indexOf('/')
  if (slash === -1) return null
  const [addr, bits] = ipaddr.parseCIDR(cidr)
  const bytes = addr.toByteArray()
  const masked = bytes.map((b, i) => {
    const left = bits - i * 8
    return left >= 8 ? b : left <= 0 ? 0 : b & ((0xff << (8 - left)) & 0xff)
  })
  if (masked.every((b, i) => b === bytes[i])) return null
  return `${ipaddr.fromByteArray(masked).toString()}/${bits}`
}
