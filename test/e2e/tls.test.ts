import { execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { request } from 'node:https'
import type { TLSSocket } from 'node:tls'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runOnce, startGateway, testYaml, type GatewayProcess } from '../helpers/gateway-process.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// Issue #25: HTTPS on the proxy port (`listen.tls`), with self-signed certificates made here;
// SIGHUP re-reads the files (a renewed certificate without a restart); an unreadable file is
// exit 2 naming it.

const dir = mkdtempSync(join(tmpdir(), 'bg-tls-'))
const cert = join(dir, 'cert.pem')
const key = join(dir, 'key.pem')

/** A self-signed certificate for CN=name, written over cert.pem / key.pem. */
function makeCert(name: string): void {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' }
  )
}

/** One HTTPS call: the status, the x-ratelimit-limit header and the certificate's CN. */
function get(port: number, path: string): Promise<{ status: number; limit: unknown; cn: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, rejectUnauthorized: false, agent: false },
      (res) => {
        const cn = String((res.socket as TLSSocket).getPeerCertificate().subject.CN)
        res.resume()
        res.on('end', () =>
          resolve({ status: res.statusCode!, limit: res.headers['x-ratelimit-limit'], cn })
        )
      }
    )
    req.on('error', reject)
    req.end()
  })
}

let up: StubUpstream
let gw: GatewayProcess
beforeAll(async () => {
  makeCert('basegate-first')
  up = await startStubUpstream()
  gw = await startGateway(
    testYaml(
      up.url,
      `listen: { host: 127.0.0.1, port: 0, tls: { cert_file: "${cert}", key_file: "${key}" } }`
    ).replace('listen: { host: 127.0.0.1, port: 0 }\n', '')
  )
})
afterAll(async () => {
  await gw?.stop()
  await up?.close()
})

describe('listen.tls', () => {
  it('serves HTTPS with the headers, and tells the server the client came over https', async () => {
    const a = await get(
      gw.port,
      '/api-gateway/api/v2/dtables/9a1b2c3d-0d3b-4c59-9a51-3e2d7c8b9a10/rows/'
    )
    expect(a).toMatchObject({ status: 200, limit: '500', cn: 'basegate-first' })
    expect(up.seen.at(-1)!.headers['x-forwarded-proto']).toBe('https')
  })

  it('re-reads the files on SIGHUP: new connections get the renewed certificate', async () => {
    makeCert('basegate-renewed')
    gw.proc.kill('SIGHUP')
    await gw.waitForLog((l) => l.msg === 'TLS certificate re-read')
    expect((await get(gw.port, '/')).cn).toBe('basegate-renewed')
  })

  it('an unreadable file is exit 2, naming it', async () => {
    const file = join(dir, 'bad.yaml')
    writeFileSync(
      file,
      `listen: { tls: { cert_file: "${join(dir, 'missing.pem')}", key_file: "${key}" } }\n`
    )
    const r = await runOnce(['check', '--config', file])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(
      /^listen\.tls\.cert_file: ".*missing\.pem" cannot be read \(ENOENT\)$/m
    )
  })

  it("issue #34: a file that is not PEM, or a key that is not the certificate's, is exit 2 from check and from the start, naming the field and the resolved path, no stack", async () => {
    const sub = join(dir, 'conf')
    execFileSync('mkdir', ['-p', sub])
    writeFileSync(join(sub, 'junk.pem'), 'this is not a certificate\n')
    // Another key, so the pair does not match.
    execFileSync('openssl', ['genrsa', '-out', join(sub, 'other-key.pem'), '2048'], {
      stdio: 'ignore',
    })
    const cases: [string, string, RegExp][] = [
      [
        'cert_file: junk.pem, key_file: ' + JSON.stringify(key),
        'listen.tls.cert_file',
        new RegExp(
          `^listen\\.tls\\.cert_file: "${sub}/junk\\.pem" is not a PEM certificate \\(.+\\)$`,
          'm'
        ),
      ],
      [
        `cert_file: ${JSON.stringify(cert)}, key_file: junk.pem`,
        'listen.tls.key_file',
        new RegExp(`^listen\\.tls\\.key_file: "${sub}/junk\\.pem" is not a PEM private key`, 'm'),
      ],
      [
        `cert_file: ${JSON.stringify(cert)}, key_file: ./other-key.pem`,
        'listen.tls.key_file',
        new RegExp(
          `^listen\\.tls\\.key_file: "${sub}/other-key\\.pem" is not the key of the certificate`,
          'm'
        ),
      ],
    ]
    for (const [tls, field, message] of cases) {
      const file = join(sub, 'limits.yaml')
      writeFileSync(file, `listen: { port: 0, tls: { ${tls} } }\nadmin: { port: 0 }\n`)
      for (const args of [
        ['check', '--config', file],
        ['--config', file],
      ]) {
        const r = await runOnce(args)
        expect([field, r.code]).toEqual([field, 2])
        expect(r.stderr).toMatch(message)
        expect(r.stderr).not.toMatch(/\n\s+at /) // no stack trace
        expect(r.stderr.trim().split('\n')).toHaveLength(1)
      }
    }
    // Relative paths beside the file: the pair copied there serves.
    execFileSync('cp', [cert, join(sub, 'c.pem')])
    execFileSync('cp', [key, join(sub, 'k.pem')])
    const good = join(sub, 'good.yaml')
    writeFileSync(good, 'listen: { tls: { cert_file: c.pem, key_file: ./k.pem } }\n')
    const ok = await runOnce(['check', '--config', good], {})
    expect(ok.code).toBe(0)
  })
})
