import { describe, expect, it } from 'vitest'
import { headEncodingRefusal, headerParams, partRefusal } from '../../src/size/encoding.js'
import { PartHeaderScanner } from '../../src/size/part-headers.js'

// SPEC §4 "Body encodings" (issue #31 items 2, 3): what the head and each multipart part say.

describe('headerParams', () => {
  it('reads quoted values whole, lower-cases names, keeps every parameter', () => {
    expect(headerParams('multipart/form-data; boundary="a;b"; Charset=UTF-8')).toEqual([
      { name: 'boundary', value: 'a;b' },
      { name: 'charset', value: 'UTF-8' },
    ])
    expect(headerParams('text/plain;a=1;;b; c = "x\\"y"')).toEqual([
      { name: 'a', value: '1' },
      { name: 'b', value: '' },
      { name: 'c', value: 'x"y' },
    ])
    expect(headerParams('application/json')).toEqual([])
  })
})

describe('headEncodingRefusal', () => {
  it.each([
    [{ 'content-type': 'application/json; charset=utf-7' }, 415, /charset "utf-7"/],
    [{ 'content-type': 'application/json; charset="UTF-16"' }, 415, /charset "UTF-16"/],
    [
      { 'content-type': 'application/x-www-form-urlencoded; charset=iso-8859-1' },
      415,
      /iso-8859-1/,
    ],
    [{ 'content-type': 'application/json', 'content-encoding': 'gzip' }, 415, /"gzip"/],
    [{ 'content-encoding': 'identity, br' }, 415, /"br"/],
    [{ 'content-type': 'multipart/form-data; boundary=a; boundary=b' }, 400, /2 boundary/],
    [{ 'content-type': "multipart/form-data; boundary=a; boundary*=UTF-8''b" }, 400, /2 boundary/],
  ])('%j → %i', (headers, status, message) => {
    const r = headEncodingRefusal(headers)
    expect(r?.status).toBe(status)
    expect(r?.message).toMatch(message)
  })

  it.each([
    [{}],
    [{ 'content-type': 'application/json' }],
    [{ 'content-type': 'application/json; charset=UTF-8' }],
    [{ 'content-type': 'application/json; charset="us-ascii"' }],
    [{ 'content-type': 'multipart/form-data; boundary="x"', 'content-encoding': 'identity' }],
  ])('%j reads as the server reads it', (headers) => {
    expect(headEncodingRefusal(headers)).toBeNull()
  })
})

describe('partRefusal', () => {
  it('refuses transfer encodings, name*=, two names and foreign charsets; passes plain parts', () => {
    expect(partRefusal([['content-transfer-encoding', 'base64']])?.status).toBe(400)
    expect(partRefusal([['content-transfer-encoding', 'Quoted-Printable']])?.message).toMatch(
      /"Quoted-Printable"/
    )
    expect(partRefusal([['content-disposition', "form-data; name*=UTF-8''sql"]])?.message).toMatch(
      /name\*=/
    )
    expect(
      partRefusal([['content-disposition', 'form-data; name*0="s"; name*1="ql"']])?.status
    ).toBe(400)
    expect(
      partRefusal([['content-disposition', 'form-data; name="a"; name="sql"']])?.message
    ).toMatch(/two name/)
    expect(partRefusal([['content-type', 'text/plain; charset=utf-7']])?.status).toBe(415)
    expect(
      partRefusal([
        ['content-disposition', 'form-data; name="sql"; filename*=UTF-8\'\'x.txt'],
        ['content-transfer-encoding', '8BIT'],
        ['content-type', 'text/plain; charset=utf-8'],
      ])
    ).toBeNull()
  })
})

describe('PartHeaderScanner', () => {
  const body = (parts: string[], b = 'XyZ') =>
    parts.map((p) => `--${b}\r\n${p}\r\n`).join('') + `--${b}--\r\n`
  const scan = (text: string, chunk: number) => {
    const s = new PartHeaderScanner('XyZ')
    const buf = Buffer.from(text)
    for (let i = 0; i < buf.length; i += chunk) s.write(buf.subarray(i, i + chunk))
    return s.refusal
  }
  const bad = body([
    'Content-Disposition: form-data; name="a"\r\n\r\nSELECT 1',
    'Content-Disposition: form-data; name="sql"\r\nContent-Transfer-Encoding: base64\r\n\r\nU0VMRUNU',
  ])
  const good = body([
    'Content-Disposition: form-data; name="a"\r\n\r\n',
    'Content-Disposition: form-data; name="sql"\r\n\r\nSELECT 1 -- name*=x\r\nContent-Transfer-Encoding: base64',
  ])

  it('finds a bad part however the body is cut into chunks', () => {
    for (const chunk of [1, 2, 3, 7, 13, 64, 10_000]) {
      expect(scan(bad, chunk)?.message).toMatch(/base64/)
      expect(scan(good, chunk)).toBeNull()
    }
  })

  it('reads folded headers, a part with no headers, and the preamble', () => {
    const folded = body(["Content-Disposition: form-data;\r\n name*=UTF-8''sql\r\n\r\nx"])
    expect(scan('preamble\r\n' + folded, 5)?.message).toMatch(/name\*=/)
    expect(
      scan(body(['\r\nno headers', 'Content-Disposition: form-data; name="a"\r\n\r\n1']), 4)
    ).toBeNull()
  })

  it('a header block that never ends is refused, not held without bound', () => {
    const s = new PartHeaderScanner('XyZ')
    s.write(Buffer.from('--XyZ\r\nX-Long: '))
    for (let i = 0; i < 100 && s.refusal === null; i++) s.write(Buffer.alloc(1024, 0x61))
    expect(s.refusal?.message).toMatch(/headers are over/)
  })
})
