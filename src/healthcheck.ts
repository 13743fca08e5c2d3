#!/usr/bin/env node
// basegate-healthcheck [PATH]: exit 0 when the local admin listener answers 200 on PATH
// (default /healthz). For container HEALTHCHECKs and Kubernetes exec probes: it runs inside
// the container, so the admin listener can stay on loopback, and it sends the admin token
// when BASEGATE_ADMIN_TOKEN is set.
import { request } from 'node:http'

const path = process.argv[2] ?? '/healthz'
const port = Number(process.env.BASEGATE_ADMIN_PORT ?? 9090)
const host = process.env.BASEGATE_ADMIN_HOST ?? '127.0.0.1'
const token = process.env.BASEGATE_ADMIN_TOKEN ?? ''

const req = request(
  { host, port, path, timeout: 2000, headers: token ? { authorization: `Bearer ${token}` } : {} },
  (res) => {
    res.resume()
    process.exit(res.statusCode === 200 ? 0 : 1)
  }
)
req.on('timeout', () => req.destroy())
req.on('error', () => process.exit(1))
req.end()
