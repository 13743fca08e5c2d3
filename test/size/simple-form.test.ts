import FormData from 'form-data'
import { describe, expect, it } from 'vitest'
import { rng } from '../helpers/rng.js'
import { PartHeaderScanner } from '../../src/size/part-headers.js'
import { simpleFormBoundary, simpleFormFields } from '../../src/size/simple-form.js'
import { formFields, formParser } from '../../src/size/form-fields.js'
import type { HeldBody } from '../../src/size/body-buffer.js'

/** Every field busboy reads, in order, configured as formFields configures it; or its error. */
function viaBusboy(body: Buffer, contentType: string): Promise<[string, string][] | string> {
  return new Promise((resolve) => {
    let bb: ReturnType<typeof formParser>
    try {
      bb = formParser(contentType, body.length)
    } catch (err) {
      return resolve(`error: ${(err as Error).message}`)
    }
    const out: [string, string][] = []
    bb.on('field', (name, value) => out.push([name, value]))
    bb.on('file', (_name, stream) => stream.resume())
    bb.on('finish', () => resolve(out))
    bb.on('error', (e: unknown) => resolve(`error: ${String(e)}`))
    bb.end(body)
  })
}

/** A form as formFields reads it without busboy: its content type, then its bytes. */
function simpleForm(body: Buffer, contentType: string): [string, string][] | null {
  const boundary = simpleFormBoundary(contentType)
  return boundary === null ? null : simpleFormFields(body, boundary)
}

function held(body: Buffer): HeldBody {
  return {
    length: body.length,
    spilled: false,
    chunks: () => [body],
    slice: async (a, b) => body.subarray(a, b),
    release: async () => {},
  }
}

describe('simpleFormFields: the SQL form read without busboy (issue #47)', () => {
  it("reads dtable-web-api's querySql form (the form-data package) as busboy does", async () => {
    const form = new FormData()
    form.append('sql', "SELECT * FROM `Table 1` WHERE Name = 'é' LIMIT 10")
    form.append('convert_keys', 'true')
    const body = form.getBuffer()
    const type = form.getHeaders()['content-type'] as string
    const simple = simpleForm(body, type)
    expect(simple).not.toBeNull()
    expect(simple).toEqual(await viaBusboy(body, type))
    // And formFields answers the same through it.
    expect(await formFields(held(body), type, ['sql'])).toEqual(
      new Map([['sql', ["SELECT * FROM `Table 1` WHERE Name = 'é' LIMIT 10"]]])
    )
  })

  it('agrees with busboy on 3,000 generated forms, or leaves them to it', async () => {
    const r = rng(5)
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!
    const names = ['sql', 'SQL', 'convert_keys', 'a b', 'q"x', 'q\\x', 'é', 'x'.repeat(120), '']
    const values = [
      'SELECT * FROM T LIMIT 50000',
      '',
      'a\r\nb',
      '--XyZ',
      '\r\n--XyZ-',
      'é ü 中',
      '\ufeffSELECT 1',
      'line\r\n\r\nmore',
    ]
    let simpleCount = 0
    for (let n = 0; n < 3_000; n++) {
      const boundary = pick(['XyZ', '----x7', 'a b', 'b"q', '--------------------------52093'])
      const parts: Buffer[] = []
      if (r() < 0.05) parts.push(Buffer.from('preamble\r\n'))
      const fields = 1 + Math.floor(r() * 3)
      for (let f = 0; f < fields; f++) {
        const header = pick([
          `Content-Disposition: form-data; name="${pick(names)}"`,
          `content-disposition: FORM-DATA; NAME="${pick(names)}"`,
          `Content-Disposition: form-data; name="${pick(names)}"; filename="a.txt"`,
          `Content-Disposition: form-data; name=${pick(names)}`,
          `Content-Disposition:form-data; name="${pick(names)}"`,
          `Content-Disposition: form-data; name="${pick(names)}"\r\nContent-Type: text/plain`,
          ...Array.from(
            { length: 6 },
            () => `Content-Disposition: form-data; name="${pick(names)}"`
          ),
        ])
        const value =
          r() < 0.05 ? Buffer.from([0x53, 0xff, 0xfe, 0x31]) : Buffer.from(pick(values), 'utf8')
        const padding = r() < 0.05 ? '  ' : ''
        parts.push(Buffer.from(`--${boundary}${padding}\r\n${header}\r\n\r\n`, 'utf8'), value)
        parts.push(Buffer.from('\r\n'))
      }
      parts.push(Buffer.from(`--${boundary}--${pick(['\r\n', '\r\n', '', 'epilogue'])}`))
      let body = Buffer.concat(parts)
      if (r() < 0.1) body = body.subarray(0, Math.floor(r() * body.length))
      const type = pick([
        `multipart/form-data; boundary="${boundary.replace(/"/g, '\\"')}"`,
        `multipart/form-data; boundary=${boundary}`,
        `multipart/form-data; charset=utf-8; boundary=${boundary}`,
      ])
      const simple = simpleForm(body, type)
      if (simple === null) continue
      simpleCount++
      expect(simple, body.toString('latin1')).toEqual(await viaBusboy(body, type))
      // A form read here has no part whose headers the raw scan would refuse.
      const scan = new PartHeaderScanner(boundary)
      scan.write(body)
      expect(scan.refusal).toBeNull()
    }
    // Enough of them read here to mean something (about one in twenty: most carry a fault).
    expect(simpleCount).toBeGreaterThan(100)
  })

  it('leaves a preamble, padding, another header, a filename, a bad byte and a BOM to busboy', () => {
    const part = (head: string, value = 'SELECT 1') =>
      Buffer.from(`--XyZ\r\n${head}\r\n\r\n${value}\r\n--XyZ--\r\n`)
    const plain = 'Content-Disposition: form-data; name="sql"'
    const T = 'multipart/form-data; boundary=XyZ'
    expect(simpleForm(part(plain), T)).toEqual([['sql', 'SELECT 1']])
    // The content type as clients write it, quoted or not; any other way goes to busboy.
    expect(simpleForm(part(plain), 'Multipart/Form-Data; boundary="XyZ"')).not.toBeNull()
    for (const other of [
      'multipart/form-data; boundary=XyZ; charset=utf-8',
      'multipart/form-data; boundary = XyZ',
      'multipart/form-data; boundary =XyZ',
      'multipart/form-data; boundary="X\\yZ"',
      'multipart/form-data; boundary=XyZ ',
      'multipart/mixed; boundary=XyZ',
    ])
      expect(simpleForm(part(plain), other), other).toBeNull()
    expect(simpleForm(Buffer.concat([Buffer.from('x\r\n'), part(plain)]), T)).toBeNull()
    expect(simpleForm(Buffer.from(`--XyZ \r\n${plain}\r\n\r\n1\r\n--XyZ--`), T)).toBeNull()
    expect(simpleForm(part(`${plain}\r\nContent-Transfer-Encoding: base64`), T)).toBeNull()
    expect(simpleForm(part(`${plain}; filename="a"`), T)).toBeNull()
    expect(simpleForm(part(plain, '\ufeffSELECT 1'), T)).toBeNull()
    const bad = Buffer.concat([
      Buffer.from(`--XyZ\r\n${plain}\r\n\r\n`),
      Buffer.from([0xc3]),
      Buffer.from('\r\n--XyZ--'),
    ])
    expect(simpleForm(bad, T)).toBeNull()
    expect(simpleForm(Buffer.from(`--XyZ\r\n${plain}\r\n\r\n1\r\n--XyZ--x`), T)).toBeNull()
  })
})
