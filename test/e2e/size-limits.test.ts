import { writeFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, testYaml } from '../helpers/gateway-process.js'
import { send } from '../helpers/http.js'
import { startStubUpstream, type StubUpstream } from '../helpers/stub-upstream.js'

// SPEC §4 size limits reloaded by a signal (a process of its own); the limits as a client meets
// them are test/process/live/size-limits.test.ts's.

const rows = `/api-gateway/api/v2/dtables/0000001e-1111-4c59-9a51-3e2d7c8b9a10/rows/`
const json = { 'content-type': 'application/json' }
const bodyWithRows = (n: number) =>
  JSON.stringify({
    table_name: 'Table1',
    rows: Array.from({ length: n }, (_, i) => ({ Name: `r${i}` })),
  })

let up: StubUpstream
beforeAll(async () => {
  up = await startStubUpstream()
})
afterAll(async () => {
  await up?.close()
})

describe('reload', () => {
  it('size_limits reload with SIGHUP', async () => {
    const g = await startGateway(testYaml(up.url, 'size_limits: { append_rows: 5 }'))
    const appendSix = async () =>
      (await send(g.port, { method: 'POST', path: rows, headers: json, body: bodyWithRows(6) }))
        .status
    try {
      expect(await appendSix()).toBe(400)
      writeFileSync(g.configFile, testYaml(up.url, 'size_limits: { append_rows: 10 }'))
      g.proc.kill('SIGHUP')
      await g.waitForLog((l) => l.msg === 'configuration reloaded')
      expect(await appendSix()).toBe(200)
    } finally {
      await g.stop()
    }
  })
})
