import { Busboy } from '@fastify/busboy'
import type { HeldBody } from './body-buffer.js'
import { headerParams, type EncodingRefusal } from './encoding.js'
import { foldKey } from './json-count.js'
import { PartHeaderScanner } from './part-headers.js'
import { MAX_FORM_FIELDS, simpleFormBoundary, simpleFormFields } from './simple-form.js'

// SPEC §4: the SQL endpoints also take form bodies: the service's own JS client
// (dtable-web-api's querySql) posts `sql` as multipart/form-data. Fields are read from the held
// bytes (@fastify/busboy, busboy's maintained fork, for multipart, streaming; URLSearchParams for urlencoded); file parts are
// skipped unread. Names are matched folded, as the JSON keys are.

export type FormKind = 'multipart' | 'urlencoded'

/** The largest form read without busboy (a SQL form is a few KB; larger ones stream through busboy). */
const SIMPLE_FORM_BYTES = 1024 * 1024

const TOO_MANY_FIELDS = `the form has more than ${MAX_FORM_FIELDS} fields`

/** The form kind a content-type names, or null (a JSON body). */
export function formKindOf(contentType: string | undefined): FormKind | null {
  const ct = (contentType ?? '').toLowerCase()
  if (ct.startsWith('multipart/form-data')) return 'multipart'
  if (ct.startsWith('application/x-www-form-urlencoded')) return 'urlencoded'
  return null
}

/** busboy as the size check reads a form with it (the simple form's test reads with it too). */
export function formParser(contentType: string, bodyLength: number): InstanceType<typeof Busboy> {
  // No field is cut short: max_body_bytes already bounds the whole body.
  return new Busboy({
    headers: { 'content-type': contentType },
    limits: { fieldSize: bodyLength, parts: MAX_FORM_FIELDS },
  })
}

/** Every value of the wanted fields (by their given name), or why the body is not read (400 or 415). */
export async function formFields(
  body: HeldBody,
  contentType: string,
  names: readonly string[]
): Promise<Map<string, string[]> | { error: string; status?: EncodingRefusal['status'] }> {
  const wanted = new Map(names.map((n) => [foldKey(n), n]))
  const out = new Map<string, string[]>(names.map((n) => [n, []]))
  const keep = (name: string | undefined, value: string) => {
    if (name === undefined) return // a part named only by name*= (refused by the header scan)
    const as = wanted.get(foldKey(name))
    if (as !== undefined) out.get(as)!.push(value)
  }
  if (formKindOf(contentType) === 'urlencoded') {
    const bytes = await body.slice(0, body.length)
    if (urlencodedFields(bytes) > MAX_FORM_FIELDS) return { error: TOO_MANY_FIELDS }
    for (const [k, v] of new URLSearchParams(bytes.toString('utf8'))) keep(k, v)
    return out
  }
  // A small form held in memory in the shape every reader reads alike: read here (simple-form.ts).
  const simpleBoundary = simpleFormBoundary(contentType)
  if (simpleBoundary !== null && !body.spilled && body.length <= SIMPLE_FORM_BYTES) {
    const simple = simpleFormFields(await body.slice(0, body.length), simpleBoundary)
    if (simple !== null) {
      for (const [name, value] of simple) keep(name, value)
      return out
    }
  }
  let bb: InstanceType<typeof Busboy>
  try {
    bb = formParser(contentType, body.length)
  } catch (err) {
    return { error: `the body is not the form its content-type says (${(err as Error).message})` }
  }
  // SPEC §4: each part's own headers, read from the raw bytes (busboy does not show them all).
  const boundary = headerParams(contentType).find((p) => p.name === 'boundary')?.value ?? ''
  const parts = new PartHeaderScanner(boundary)
  let tooMany = false
  return new Promise((resolve) => {
    bb.on('field', (name, value) => keep(name, value))
    bb.on('file', (_name, stream) => stream.resume())
    bb.on('partsLimit', () => {
      // The rest is not read (the loop below stops): a refusal found before it still wins.
      tooMany = true
      const r = parts.refusal
      resolve(r !== null ? { error: r.message, status: r.status } : { error: TOO_MANY_FIELDS })
    })
    bb.on('finish', () => {
      const r = parts.refusal
      resolve(r === null ? out : { error: r.message, status: r.status })
    })
    bb.on('error', (e: unknown) => {
      const err = e instanceof Error ? e : new Error(String(e))
      const r = parts.refusal
      if (r !== null) resolve({ error: r.message, status: r.status })
      else resolve({ error: `the body is not valid multipart form data (${err.message})` })
    })
    void (async () => {
      for await (const c of body.chunks()) {
        parts.write(c)
        bb.write(c)
        if (tooMany) return
      }
      bb.end()
    })().catch(() => resolve({ error: 'the multipart body could not be read' }))
  })
}

/** The fields of an urlencoded form: its non-empty `&`-separated sequences (WHATWG's reading). */
function urlencodedFields(bytes: Buffer): number {
  let n = 0
  let from = 0
  for (;;) {
    const amp = bytes.indexOf(0x26, from)
    const end = amp === -1 ? bytes.length : amp
    if (end > from) n++
    if (amp === -1 || n > MAX_FORM_FIELDS) return n
    from = amp + 1
  }
}
