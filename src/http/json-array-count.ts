// SPEC §4: the length of a body's top-level array field (`rows`, `updates`, `row_ids`),
// counted by a byte scanner as the body arrives: strings, escapes and nesting, validating the
// JSON grammar as JSON.parse does, with memory bounded by the nesting depth (a stack of one
// entry per level), never by the body's size. Where the field is named twice, the last one
// counts, as the server's JSON parser reads it.
//
// One loop over the bytes with the state in locals: per byte it costs a compare or two in
// strings (most of a row's bytes), and a small switch elsewhere.

export class JsonSyntaxError extends Error {}

// Scanner states.
const VALUE = 0 // expecting a value
const OBJ_KEY_OR_END = 1 // after `{`
const OBJ_KEY = 2 // after `,` in an object
const COLON = 3 // after a key
const OBJ_NEXT = 4 // after a value in an object
const ARR_VALUE_OR_END = 5 // after `[`
const ARR_NEXT = 6 // after a value in an array
const STR = 7 // inside a string
const STR_ESC = 8 // after a backslash
const STR_HEX = 9 // inside \uXXXX
const NUM = 10 // inside a number
const LIT = 11 // inside true / false / null
const DONE = 12 // after the top-level value

// Number automaton (JSON's grammar): where the number is, and whether it may end there.
const N_SIGN = 0 // after `-`
const N_ZERO = 1 // a leading 0 (ends ok)
const N_INT = 2 // integer digits (ends ok)
const N_DOT = 3 // after `.`
const N_FRAC = 4 // fraction digits (ends ok)
const N_E = 5 // after e/E
const N_ESIGN = 6 // after e+ / e-
const N_EXP = 7 // exponent digits (ends ok)

const OPEN_OBJ = 0x7b
const OPEN_ARR = 0x5b

/** A key longer than this cannot be a counted field; its bytes are not kept. */
const MAX_KEY = 64

/** What the body held: the field's array length, or why it has none. */
export type FieldCount =
  | { kind: 'count'; count: number }
  | { kind: 'not_object' }
  | { kind: 'missing' }
  | { kind: 'not_array' }

const isDigit = (b: number) => b >= 0x30 && b <= 0x39
const isHex = (b: number) => isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)

export class JsonArrayCounter {
  private state = VALUE
  /** `{` or `[` per open level. */
  private readonly stack: number[] = []
  private strIsKey = false
  private key: number[] = []
  private keyLong = false
  private hexLeft = 0
  private num = N_SIGN
  private lit = ''
  private litAt = 0
  /** The top-level object's last key (when it is short enough to be the field). */
  private lastKey: string | null = null
  private topIsObject = false
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

  end(): FieldCount {
    if (this.state === NUM) this.endNumber()
    if (this.state === LIT) this.endLiteral()
    if (this.state !== DONE) this.fail('the body ends early')
    if (!this.topIsObject) return { kind: 'not_object' }
    if (this.fieldSeen === null) return { kind: 'missing' }
    if (this.fieldSeen === 'other') return { kind: 'not_array' }
    return { kind: 'count', count: this.count }
  }

  write(buf: Uint8Array): void {
    const n = buf.length
    let state = this.state
    let i = 0
    try {
      while (i < n) {
        let b = buf[i]!
        switch (state) {
          case STR:
            if (!(this.strIsKey && this.stack.length === 1)) {
              // Hot path: row data is mostly string bytes.
              while (b !== 0x22 && b !== 0x5c && b >= 0x20) {
                if (++i === n) return
                b = buf[i]!
              }
            } else if (b !== 0x22 && b !== 0x5c && b >= 0x20) {
              this.keyByte(b)
              break
            }
            if (b === 0x22) state = this.endString()
            else if (b === 0x5c) {
              this.keyByte(b)
              state = STR_ESC
            } else this.fail('a control character in a string')
            break
          case STR_ESC:
            if (b === 0x75) {
              this.hexLeft = 4
              state = STR_HEX
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
              state = STR
            } else this.fail('a bad escape')
            this.keyByte(b)
            break
          case STR_HEX:
            if (!isHex(b)) this.fail('a bad \\u escape')
            this.keyByte(b)
            if (--this.hexLeft === 0) state = STR
            break
          case NUM:
            if (this.numByte(b)) break
            this.state = state
            this.endNumber()
            state = this.state
            continue // the byte after the number is read in the new state
          case LIT:
            if (this.litAt < this.lit.length) {
              if (b !== this.lit.charCodeAt(this.litAt++)) this.fail('an unknown literal')
              break
            }
            this.state = state
            this.endLiteral()
            state = this.state
            continue
          default:
            if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) break
            this.state = state
            this.structural(b)
            state = this.state
        }
        i++
      }
    } finally {
      this.state = state
    }
  }

  private fail(what: string): never {
    throw new JsonSyntaxError(`the body is not valid JSON (${what})`)
  }

  /** A byte outside strings, numbers and literals (white space already skipped). */
  private structural(b: number): void {
    switch (this.state) {
      case VALUE:
        return this.valueStarts(b)
      case ARR_VALUE_OR_END:
        if (b === 0x5d) return this.close(b)
        return this.valueStarts(b)
      case OBJ_KEY_OR_END:
        if (b === 0x7d) return this.close(b)
      // falls through: a key
      case OBJ_KEY:
        if (b !== 0x22) this.fail('an object key that is not a string')
        this.strIsKey = true
        this.key = []
        this.keyLong = false
        this.state = STR
        return
      case COLON:
        if (b !== 0x3a) this.fail('a missing colon')
        this.state = VALUE
        return
      case OBJ_NEXT:
        if (b === 0x2c) return void (this.state = OBJ_KEY)
        if (b === 0x7d) return this.close(b)
        return this.fail('a missing comma or }')
      case ARR_NEXT:
        if (b === 0x2c) return void (this.state = VALUE)
        if (b === 0x5d) return this.close(b)
        return this.fail('a missing comma or ]')
      default:
        return this.fail('text after the body')
    }
  }

  /** A value begins: count it when it is an element of the field's array. */
  private valueStarts(b: number): void {
    const depth = this.stack.length
    if (depth === 0) this.topIsObject = b === OPEN_OBJ
    else if (depth === 2 && this.inField) this.count++
    else if (depth === 1 && this.stack[0] === OPEN_OBJ && this.lastKey === this.field) {
      // The field's value, at depth 1 of the top-level object: the last occurrence counts.
      this.fieldSeen = b === OPEN_ARR ? 'array' : 'other'
      this.count = 0
      this.inField = b === OPEN_ARR
    }
    if (b === OPEN_OBJ) {
      this.stack.push(b)
      this.state = OBJ_KEY_OR_END
    } else if (b === OPEN_ARR) {
      this.stack.push(b)
      this.state = ARR_VALUE_OR_END
    } else if (b === 0x22) {
      this.strIsKey = false
      this.state = STR
    } else if (b === 0x74 || b === 0x66 || b === 0x6e) {
      this.lit = b === 0x74 ? 'true' : b === 0x66 ? 'false' : 'null'
      this.litAt = 1
      this.state = LIT
    } else if (b === 0x2d || isDigit(b)) {
      this.num = b === 0x2d ? N_SIGN : b === 0x30 ? N_ZERO : N_INT
      this.state = NUM
    } else this.fail('an unexpected character')
  }

  /** Advances the number automaton; false when `b` is not part of the number. */
  private numByte(b: number): boolean {
    const d = isDigit(b)
    switch (this.num) {
      case N_SIGN:
        if (!d) this.fail('a malformed number')
        this.num = b === 0x30 ? N_ZERO : N_INT
        return true
      case N_ZERO:
      case N_INT:
        if (d) {
          if (this.num === N_ZERO) this.fail('a malformed number')
          return true
        }
        if (b === 0x2e) return ((this.num = N_DOT), true)
        if (b === 0x65 || b === 0x45) return ((this.num = N_E), true)
        return false
      case N_DOT:
        if (!d) this.fail('a malformed number')
        this.num = N_FRAC
        return true
      case N_FRAC:
        if (d) return true
        if (b === 0x65 || b === 0x45) return ((this.num = N_E), true)
        return false
      case N_E:
        if (b === 0x2b || b === 0x2d) return ((this.num = N_ESIGN), true)
      // falls through: a digit must come
      case N_ESIGN:
        if (!d) this.fail('a malformed number')
        this.num = N_EXP
        return true
      default:
        return d
    }
  }

  private endNumber(): void {
    if (this.num === N_SIGN || this.num === N_DOT || this.num === N_E || this.num === N_ESIGN) {
      this.fail('a malformed number')
    }
    this.valueEnds()
  }

  private endLiteral(): void {
    if (this.litAt < this.lit.length) this.fail('an unknown literal')
    this.valueEnds()
  }

  /** A value ended: what may follow depends on the container. */
  private valueEnds(): void {
    const top = this.stack[this.stack.length - 1]
    this.state = top === undefined ? DONE : top === OPEN_OBJ ? OBJ_NEXT : ARR_NEXT
  }

  private close(b: number): void {
    const open = this.stack.pop()
    if ((b === 0x7d && open !== OPEN_OBJ) || (b === 0x5d && open !== OPEN_ARR))
      this.fail('a mismatched bracket')
    if (this.stack.length === 1 && b === 0x5d) this.inField = false
    this.valueEnds()
  }

  private keyByte(b: number): void {
    if (!this.strIsKey || this.keyLong || this.stack.length !== 1) return
    if (this.key.length >= MAX_KEY) {
      this.keyLong = true
      this.key = []
    } else this.key.push(b)
  }

  /** The closing quote: a value ends, or a key waits for its colon. */
  private endString(): number {
    if (!this.strIsKey) {
      this.valueEnds()
      return this.state
    }
    if (this.stack.length === 1) {
      // Escapes in a key (`"\u0072ows"` is `rows`) are read as the server reads them.
      this.lastKey = this.keyLong
        ? null
        : (JSON.parse(`"${Buffer.from(this.key).toString('utf8')}"`) as string)
    }
    return COLON
  }
}
