// SPEC §4: the length of a body's top-level array field (`rows`, `updates`, `row_ids`),
// counted by a byte scanner as the body arrives: strings, escapes and nesting, validating the
// JSON grammar as JSON.parse does, with memory bounded by the nesting depth (a stack of one
// byte per level), never by the body's size. Where the field is named twice, the last one
// counts, as the server's JSON parser reads it.

export class JsonSyntaxError extends Error {}

const enum S {
  Value, // expecting a value
  ObjKeyOrEnd, // after `{`: a key or `}`
  ObjKey, // after `,` in an object: a key
  Colon, // after a key
  ObjNext, // after a value in an object: `,` or `}`
  ArrValueOrEnd, // after `[`: a value or `]`
  ArrNext, // after a value in an array: `,` or `]`
  Str, // inside a string
  StrEsc, // after a backslash
  StrHex, // inside \uXXXX
  Num, // inside a number
  Lit, // inside true / false / null
  Done, // after the top-level value
}

const WS = (b: number) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d
const HEX = (b: number) =>
  (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
const NUM_CHAR = (b: number) =>
  (b >= 0x30 && b <= 0x39) || b === 0x2d || b === 0x2b || b === 0x2e || b === 0x65 || b === 0x45
const NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/
/** A key longer than this cannot be a counted field; its bytes are not kept. */
const MAX_KEY = 64

/** What the body held: the field's array length, or why it has none. */
export type FieldCount =
  | { kind: 'count'; count: number }
  | { kind: 'not_object' }
  | { kind: 'missing' }
  | { kind: 'not_array' }

export class JsonArrayCounter {
  private state = S.Value
  /** `{` or `[` per open level. */
  private readonly stack: number[] = []
  private strIsKey = false
  private key: number[] = []
  private keyLong = false
  private hexLeft = 0
  private token: number[] = []
  private litWord = ''
  /** The top-level object's last key read (when it is short enough to be the field). */
  private lastKey: string | null = null
  private topIsObject: boolean | null = null
  /** The field's value type at its last occurrence, and the running count when an array. */
  private fieldSeen: 'array' | 'other' | null = null
  private count = 0
  /** True while the scanner is directly inside the field's array. */
  private inField = false

  constructor(private readonly field: string) {}

  /** The count so far (for a running check against the limit). */
  get current(): number {
    return this.fieldSeen === 'array' ? this.count : 0
  }

  write(buf: Uint8Array): void {
    for (let i = 0; i < buf.length; i++) this.byte(buf[i]!)
  }

  end(): FieldCount {
    if (this.state === S.Num) this.endNumber()
    if (this.state === S.Lit) {
      if (this.litWord !== 'true' && this.litWord !== 'false' && this.litWord !== 'null')
        this.fail('an unknown literal')
      this.valueEnds()
    }
    if (this.state !== S.Done) this.fail('the body ends early')
    if (!this.topIsObject) return { kind: 'not_object' }
    if (this.fieldSeen === null) return { kind: 'missing' }
    if (this.fieldSeen === 'other') return { kind: 'not_array' }
    return { kind: 'count', count: this.count }
  }

  private fail(what: string): never {
    throw new JsonSyntaxError(`the body is not valid JSON (${what})`)
  }

  /** A value begins: count it when it is an element of the field's array. */
  private valueStarts(b: number): void {
    const depth = this.stack.length
    if (depth === 0) this.topIsObject = b === 0x7b
    if (this.inField && depth === 2) this.count++
    // The field's value at depth 1 of the top-level object.
    if (depth === 1 && this.stack[0] === 0x7b && this.lastKey === this.field) {
      this.fieldSeen = b === 0x5b ? 'array' : 'other'
      this.count = 0
      this.inField = b === 0x5b
    }
    switch (b) {
      case 0x7b: // {
        this.stack.push(b)
        this.state = S.ObjKeyOrEnd
        return
      case 0x5b: // [
        this.stack.push(b)
        this.state = S.ArrValueOrEnd
        return
      case 0x22: // "
        this.strIsKey = false
        this.state = S.Str
        return
      case 0x74:
      case 0x66:
      case 0x6e: // t f n
        this.litWord = String.fromCharCode(b)
        this.state = S.Lit
        return
      default:
        if (b === 0x2d || (b >= 0x30 && b <= 0x39)) {
          this.token = [b]
          this.state = S.Num
          return
        }
        this.fail('an unexpected character')
    }
  }

  /** A value ended: what may follow depends on the container. */
  private valueEnds(): void {
    const top = this.stack[this.stack.length - 1]
    this.state = top === undefined ? S.Done : top === 0x7b ? S.ObjNext : S.ArrNext
  }

  private close(b: number): void {
    const open = this.stack.pop()
    if ((b === 0x7d && open !== 0x7b) || (b === 0x5d && open !== 0x5b))
      this.fail('a mismatched bracket')
    if (this.stack.length === 1 && b === 0x5d) this.inField = false
    this.valueEnds()
  }

  private endNumber(): void {
    if (!NUMBER.test(String.fromCharCode(...this.token))) this.fail('a malformed number')
    this.valueEnds()
  }

  private byte(b: number): void {
    switch (this.state) {
      case S.Str:
        if (b === 0x22) return this.endString()
        if (b === 0x5c) return void (this.state = S.StrEsc)
        if (b < 0x20) this.fail('a control character in a string')
        return this.keyByte(b)
      case S.StrEsc:
        if (b === 0x75) {
          this.hexLeft = 4
          this.state = S.StrHex
        } else if (
          b === 0x22 ||
          b === 0x5c ||
          b === 0x2f ||
          b === 0x62 ||
          b === 0x66 ||
          b === 0x6e ||
          b === 0x72 ||
          b === 0x74
        ) {
          this.state = S.Str
        } else this.fail('a bad escape')
        this.keyByte(0x5c)
        return this.keyByte(b)
      case S.StrHex:
        if (!HEX(b)) this.fail('a bad \\u escape')
        this.keyByte(b)
        if (--this.hexLeft === 0) this.state = S.Str
        return
      case S.Num:
        if (NUM_CHAR(b)) return void this.token.push(b)
        this.endNumber()
        return this.byte(b)
      case S.Lit: {
        if (b >= 0x61 && b <= 0x7a) {
          this.litWord += String.fromCharCode(b)
          if (this.litWord.length > 5) this.fail('an unknown literal')
          return
        }
        if (this.litWord !== 'true' && this.litWord !== 'false' && this.litWord !== 'null')
          this.fail('an unknown literal')
        this.valueEnds()
        return this.byte(b)
      }
    }
    if (WS(b)) return
    switch (this.state) {
      case S.Value:
        return this.valueStarts(b)
      case S.ArrValueOrEnd:
        if (b === 0x5d) return this.close(b)
        return this.valueStarts(b)
      case S.ObjKeyOrEnd:
        if (b === 0x7d) return this.close(b)
      // falls through: a key
      case S.ObjKey:
        if (b !== 0x22) this.fail('an object key that is not a string')
        this.strIsKey = true
        this.key = []
        this.keyLong = false
        this.state = S.Str
        return
      case S.Colon:
        if (b !== 0x3a) this.fail('a missing colon')
        this.state = S.Value
        return
      case S.ObjNext:
        if (b === 0x2c) return void (this.state = S.ObjKey)
        if (b === 0x7d) return this.close(b)
        return this.fail('a missing comma or }')
      case S.ArrNext:
        if (b === 0x2c) return void (this.state = S.Value)
        if (b === 0x5d) return this.close(b)
        return this.fail('a missing comma or ]')
      case S.Done:
        return this.fail('text after the body')
    }
  }

  private keyByte(b: number): void {
    if (!this.strIsKey || this.keyLong || this.stack.length !== 1) return
    if (this.key.length >= MAX_KEY) {
      this.keyLong = true
      this.key = []
    } else this.key.push(b)
  }

  private endString(): void {
    if (!this.strIsKey) return this.valueEnds()
    if (this.stack.length === 1) {
      // Escapes in a key (`"\u0072ows"` is `rows`) are read as the server reads them.
      this.lastKey = this.keyLong
        ? null
        : (JSON.parse(`"${Buffer.from(this.key).toString('utf8')}"`) as string)
    }
    this.state = S.Colon
  }
}
