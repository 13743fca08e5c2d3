import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'

// `basegate demo-upstream [--port 8000]`: a stand-in for the service's server with
// SeaTable-shaped answers (SERVICE.md), so basegate's first screen shows a real answer before
// a real server is behind it. Not a server to use: it keeps nothing.

const ROWS = [
  { _id: 'Qtf7xPmoRaiFyQPO1aENTQ', Name: 'Plan the launch', Status: 'Doing' },
  { _id: 'GRlmaJbTRmOFP8M9YMpZsw', Name: 'Write the docs', Status: 'Done' },
]

function answer(req: IncomingMessage, body: string): unknown {
  const path = (req.url ?? '/').split('?')[0]!.replace(/\/+$/, '/')
  if (/^\/server-info\/?$/.test(path)) return { version: '6.2.3', edition: 'enterprise edition' }
  if (/^\/api2\/ping\/?$/.test(path)) return 'pong'
  if (/^\/api-gateway\/api\/v2\/ping\/?$/.test(path)) return { ret: 'pong' }
  if (/^\/api2\/auth-token\/?$/.test(path)) return { token: 'demo-account-token' }
  if (/^\/api\/v2\.1\/dtable\/app-access-token\/?$/.test(path)) {
    return {
      app_name: 'demo',
      access_token: 'demo-base-token',
      dtable_uuid: '6f1c2a4e-0d3b-4c59-9a51-3e2d7c8b9a10',
      dtable_server: 'http://127.0.0.1:8080/api-gateway/',
      dtable_db: 'http://127.0.0.1:8080/dtable-db/',
    }
  }
  if (/\/rows\/?$/.test(path)) {
    if (req.method === 'GET') return { rows: ROWS }
    let n = 0
    try {
      const j = JSON.parse(body) as { rows?: unknown[]; updates?: unknown[]; row_ids?: unknown[] }
      n = (j.rows ?? j.updates ?? j.row_ids ?? []).length
    } catch {
      return { error_msg: 'invalid JSON' }
    }
    if (req.method === 'POST') return { inserted_row_count: n }
    if (req.method === 'PUT') return { success: true }
    if (req.method === 'DELETE') return { deleted_rows: n }
  }
  if (/\/sql\/?$/.test(path))
    return { metadata: [{ key: 'Name', name: 'Name', type: 'text' }], results: ROWS, success: true }
  return { error_msg: 'not found in the demo upstream' }
}

export function createDemoUpstream() {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = answer(req, Buffer.concat(chunks).toString('utf8'))
      const missing = typeof body === 'object' && body !== null && 'error_msg' in body
      const text = JSON.stringify(body)
      res.writeHead(missing ? 404 : 200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(text),
      })
      res.end(text)
    })
  })
}

export function runDemoUpstream(port: number, host = '127.0.0.1'): void {
  const server = createDemoUpstream()
  // Issue #25: a busy port is one line and exit 1, not a stack trace.
  server.once('error', (err: NodeJS.ErrnoException) => {
    const why =
      err.code === 'EADDRINUSE' ? 'is in use' : `cannot be used (${err.code ?? err.message})`
    process.stderr.write(`demo-upstream: port ${port} on ${host} ${why}; try --port N\n`)
    process.exit(1)
  })
  server.listen(port, host, () => {
    process.stdout.write(`demo upstream (SeaTable-shaped answers) on http://${host}:${port}\n`)
  })
}
