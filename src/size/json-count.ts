// SPEC §4: the length of a body's top-level array field (`rows`, `updates`, `row_ids`),
// counted by a byte scanner as the body arrives: strings, escapes and nesting, validating the
// JSON grammar as JSON.parse does, with memory bounded by the nesting cap (MAX_DEPTH levels,
// one byte each), never by the body's size. Where the field is named twice, the last one
// counts, as the server's JSON parser reads it; a key that equals the field but for case
// counts as the field (Go's encoding/json matches keys so). The scanner also finds where
// other top-level fields' values lie (`sql`, `parameters`), by the same key rule, so that
// they can be read from the held bytes without a parse tree of the body.
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

/**
 * SPEC §4: a body nested deeper is refused. Servers' parsers stop near here (Python's json at
 * the recursion limit, Go's at 10,000, browsers' far deeper), and the scanner's memory is
 * bounded by this, not by the body's size.
 */
export const MAX_DEPTH = 512

/**
 * Keys are compared folded as Go's encoding/json folds them (each character upper-cased after
 * lower-casing): `Rows`, `ROWS`, and even `roſs` (long s) read as `rows` there.
 */
export function foldKey(key: string): string {
  return key.toLowerCase().toUpperCase()
}

/** Where a captured field's value lies in the body: bytes [start, end). */
export interface Span {
  start: number
  end: number
}

/** What the body held: the field's array length, or why it has none. */
export type FieldCount =
  | { kind: 'count'; count: number }
  | { kind: 'not_object' }
  | { kind: 'missing' }
  | { kind: 'not_array' }

const isDigit = (b: number) => b >= 0x30 && b <= 0x39
const isHex = (b: number) => isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
/** The letter after a backslash of a one-letter escape: `"` `\\` `/` b f n r t. */
const isSimpleEscape = (b: number) =>
  b === 0x22 ||
  b === 0x5c ||
  b === 0x2f ||
  b === 0x62 ||
  b === 0x66 ||
  b === 0x6e ||
  b === 0x72 ||
  b === 0x74

/** numStep: the byte ends the number (read it in the next state). */
const NUM_END = -1
/** numStep: the byte cannot be where it is (`01`, `1.`, `1e`). */
const NUM_BAD = -2

/** The number automaton's next state on `b`, or NUM_END / NUM_BAD. */
function numStep(num: number, b: number): number {
  const d = b >= 0x30 && b <= 0x39
  switch (num) {
    case N_SIGN:
      if (!d) return NUM_BAD
      return b === 0x30 ? N_ZERO : N_INT
    case N_ZERO:
      if (d) return NUM_BAD
    // falls through: a leading 0 takes a fraction or an exponent as an integer does
    case N_INT:
      if (d) return N_INT
      if (b === 0x2e) return N_DOT
      if (b === 0x65 || b === 0x45) return N_E
      return NUM_END
    case N_DOT:
      return d ? N_FRAC : NUM_BAD
    case N_FRAC:
      if (d) return N_FRAC
      if (b === 0x65 || b === 0x45) return N_E
      return NUM_END
    case N_E:
      if (b === 0x2b || b === 0x2d) return N_ESIGN
      return d ? N_EXP : NUM_BAD
    case N_ESIGN:
      return d ? N_EXP : NUM_BAD
    default:
      return d ? N_EXP : NUM_END
  }
}

// SPEC §4, issue #47: a row read whole in one tight pass. Most rows clients send are small
// objects whole in the chunk at hand; a recursive reader takes one at a time with no state
// but the index, checking every byte as the byte-wise states would (a row it takes, they would
// take). Anything else (a row cut by the chunk's end, nesting past ROW_DEPTH, any fault) is
// answered -1 and left to those states from the row's `{`; they also say what is wrong.
//
// The reader tests no bound: it reads a copy of the chunk with a 0 after it, which every test
// here fails (in a string's loop `b >= 0x20`), so no loop passes it. It once read the chunk
// itself, where the read past the end answered undefined: the first row a chunk cut then
// taught V8 that a byte may be undefined, and every read after it, in every body, went the
// slow way for the life of the process (1 GB/s fell to 170 MB/s on rows with long strings,
// 640 to 300 MB/s on the 43 KB append). A bound tested on every read instead cost a third.

/** The largest piece of a chunk read at once (so the copy stays small). */
const PIECE = 64 * 1024
/** The copy the scanner reads, and the 0 after it (one a process: a write runs to its end before another). */
const scratch = new Uint8Array(PIECE + 1)

/** Levels a row may nest for the one-pass reader; deeper rows go byte by byte (up to MAX_DEPTH). */
const ROW_DEPTH = 8

/** An escape from its backslash at `i`: the index of its last byte, or -1. */
function rowEscape(buf: Uint8Array, i: number): number {
  const b = buf[++i]!
  if (b === 0x75)
    return isHex(buf[i + 1]!) && isHex(buf[i + 2]!) && isHex(buf[i + 3]!) && isHex(buf[i + 4]!)
      ? i + 4
      : -1
  return isSimpleEscape(b) ? i : -1
}

/** A string from its opening quote at `i`: the index after its closing quote, or -1. */
function rowString(buf: Uint8Array, i: number): number {
  for (;;) {
    // Most of a row's bytes: a loop of the three tests alone (with the escape's reading in
    // it, V8 made it half as fast).
    let b = 0
    do b = buf[++i]!
    while (b !== 0x22 && b !== 0x5c && b >= 0x20)
    if (b === 0x22) return i + 1
    if (b !== 0x5c) return -1
    i = rowEscape(buf, i)
    if (i < 0) return -1
  }
}

/**
 * A number's fraction and exponent, from the byte after its integer part at `i`: the index after
 * the number, or -1. JSON's number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
 */
function rowNumberTail(buf: Uint8Array, i: number): number {
  let b = buf[i]!
  if (b === 0x2e) {
    b = buf[++i]!
    if (!isDigit(b)) return -1
    b = buf[++i]!
    while (isDigit(b)) b = buf[++i]!
  }
  if (b === 0x65 || b === 0x45) {
    b = buf[++i]!
    if (b === 0x2b || b === 0x2d) b = buf[++i]!
    if (!isDigit(b)) return -1
    b = buf[++i]!
    while (isDigit(b)) b = buf[++i]!
  }
  return i
}

/** A value from its first byte at `i`: the index after it, or -1. */
function rowValue(buf: Uint8Array, i: number, left: number): number {
  let b = buf[i]!
  if (b === 0x22) return rowString(buf, i)
  if (isDigit(b) || b === 0x2d) {
    if (b === 0x2d) b = buf[++i]!
    if (b === 0x30) i++
    else if (b >= 0x31 && b <= 0x39) {
      b = buf[++i]!
      while (isDigit(b)) b = buf[++i]!
    } else return -1
    return rowNumberTail(buf, i)
  }
  if (b === 0x74)
    return buf[i + 1] === 0x72 && buf[i + 2] === 0x75 && buf[i + 3] === 0x65 ? i + 4 : -1
  if (b === 0x66)
    return buf[i + 1] === 0x61 && buf[i + 2] === 0x6c && buf[i + 3] === 0x73 && buf[i + 4] === 0x65
      ? i + 5
      : -1
  if (b === 0x6e)
    return buf[i + 1] === 0x75 && buf[i + 2] === 0x6c && buf[i + 3] === 0x6c ? i + 4 : -1
  if (left === 0) return -1
  if (b === OPEN_OBJ || b === OPEN_ARR) return rowNested(buf, i, left - 1)
  return -1
}

/** An object or an array from its `{` or `[` at `i`: the index after its end, or -1. */
function rowNested(buf: Uint8Array, i: number, left: number): number {
  const isObject = buf[i] === OPEN_OBJ
  const end = isObject ? 0x7d : 0x5d
  let b = buf[++i]!
  while (isJsonSpace(b)) b = buf[++i]!
  if (b === end) return i + 1
  for (;;) {
    if (isObject) {
      if (b !== 0x22) return -1
      i = rowString(buf, i)
      if (i < 0) return -1
      b = buf[i]!
      while (isJsonSpace(b)) b = buf[++i]!
      if (b !== 0x3a) return -1
      b = buf[++i]!
      while (isJsonSpace(b)) b = buf[++i]!
    }
    if (b === 0x22) {
      i = rowString(buf, i)
      if (i < 0) return -1
      b = buf[i]!
    } else if (b >= 0x31 && b <= 0x39) {
      // A number not below 1 here, its integer part in the loop (most numbers in rows).
      b = buf[++i]!
      while (isDigit(b)) b = buf[++i]!
      if (b === 0x2e || b === 0x65 || b === 0x45) {
        i = rowNumberTail(buf, i)
        if (i < 0) return -1
        b = buf[i]!
      }
    } else {
      i = rowValue(buf, i, left)
      if (i < 0) return -1
      b = buf[i]!
    }
    while (isJsonSpace(b)) b = buf[++i]!
    if (b === end) return i + 1
    if (b !== 0x2c) return -1
    b = buf[++i]!
    while (isJsonSpace(b)) b = buf[++i]!
  }
}

/** The rows the one-pass reader may miss beyond those it took before the scanner stops trying it. */
const ROW_MISSES = 8

export interface ScanOptions {
  /** The top-level array field whose length is counted, or null. */
  count: string | null
  /** Top-level fields whose value's span is wanted (last occurrence, folded keys). */
  capture?: readonly string[]
}

export class JsonBodyScanner {
  private state = VALUE
  /** `{` or `[` per open level, up to MAX_DEPTH. */
  private readonly stack = new Uint8Array(MAX_DEPTH)
  private depth = 0
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
  /** Rows the one-pass reader took, and rows it left to the byte-wise states (issue #47). */
  private rowHits = 0
  private rowMisses = 0
  /** True while the scanner is directly inside the field's array. */
  private inField = false
  private readonly field: string | null
  /** Folded key → the name its span is filed under. */
  private readonly captureNames: ReadonlyMap<string, string>
  /** The absolute offset of the current chunk's first byte, and of the byte being read. */
  private base = 0
  private at = 0
  /** The capture whose value is being read, and where it began. */
  private capturing: string | null = null
  private captureStart = 0
  readonly spans = new Map<string, Span>()

  constructor(opts: ScanOptions) {
    this.field = opts.count === null ? null : foldKey(opts.count)
    this.captureNames = new Map((opts.capture ?? []).map((n) => [foldKey(n), n]))
  }

  /** The count so far (for a running check against the limit). */
  get current(): number {
    return this.fieldSeen === 'array' ? this.count : 0
  }

  end(): FieldCount {
    this.at = this.base
    if (this.state === NUM) this.endNumber()
    if (this.state === LIT) this.endLiteral()
    if (this.state !== DONE) this.fail('the body ends early')
    if (!this.topIsObject) return { kind: 'not_object' }
    if (this.fieldSeen === null) return { kind: 'missing' }
    if (this.fieldSeen === 'other') return { kind: 'not_array' }
    return { kind: 'count', count: this.count }
  }

  write(chunk: Uint8Array): void {
    for (let o = 0; o < chunk.length; o += PIECE) {
      const piece = o === 0 && chunk.length <= PIECE ? chunk : chunk.subarray(o, o + PIECE)
      scratch.set(piece)
      scratch[piece.length] = 0
      this.scan(scratch, piece.length)
    }
  }

  /** Reads `n` bytes of `buf`, a copy with a 0 after them (see the row reader). */
  private scan(buf: Uint8Array, n: number): void {
    const stack = this.stack
    // The state in locals: the loop touches `this` only on a rare step (the top-level
    // object's keys and values, the counted array's ends, escapes), synced around it.
    let state = this.state
    let depth = this.depth
    let count = this.count
    let inField = this.inField
    let isKey = this.strIsKey
    let num = this.num
    let i = 0
    // No try/finally: a throw leaves the scanner failed, its state no longer read.
    scan: while (i < n) {
      let b = buf[i]!
      switch (state) {
        case STR:
          if (isKey && depth === 1) {
            if (b !== 0x22 && b !== 0x5c && b >= 0x20) {
              this.keyByte(b)
              break
            }
          } else {
            // Hot path: row data is mostly string bytes.
            while (b !== 0x22 && b !== 0x5c && b >= 0x20) {
              if (++i === n) break scan
              b = buf[i]!
            }
          }
          if (b === 0x22) {
            if (depth <= 1) {
              this.put(state, depth, count, isKey, num, i)
              this.at++
              this.state = this.endString()
              ;({ state, depth, count, inField, strIsKey: isKey, num } = this)
            } else if (isKey) {
              // The common `"key":"` read here, not one byte a turn.
              state = COLON
              if (buf[i + 1] === 0x3a) {
                i++
                state = VALUE
                if (buf[i + 1] === 0x22) {
                  i++
                  isKey = false
                  state = STR
                }
              }
            } else if (stack[depth - 1] === OPEN_OBJ) {
              // And `","` after a value in an object.
              state = OBJ_NEXT
              if (depth > 2 && buf[i + 1] === 0x2c) {
                i++
                state = OBJ_KEY
                if (buf[i + 1] === 0x22) {
                  i++
                  isKey = true
                  state = STR
                }
              }
            } else state = ARR_NEXT
          } else if (b === 0x5c) {
            if (isKey && depth === 1) this.keyByte(b)
            state = STR_ESC
          } else this.fail('a control character in a string')
          break
        case STR_ESC:
        case STR_HEX:
          state = this.escapeByte(state, b, isKey && depth === 1)
          break
        case NUM: {
          const next = numStep(num, b)
          if (next >= 0) {
            num = next
            break
          }
          if (next === NUM_BAD) this.fail('a malformed number')
          if (num === N_SIGN || num === N_DOT || num === N_E || num === N_ESIGN)
            this.fail('a malformed number')
          if (depth <= 1) {
            this.put(state, depth, count, isKey, num, i)
            this.valueEnds()
            ;({ state, depth, count, inField, strIsKey: isKey, num } = this)
            continue // the byte after the number is read in the new state
          }
          state = stack[depth - 1] === OPEN_OBJ ? OBJ_NEXT : ARR_NEXT
          // falls through: the byte after the value, read here when it is the common `,"` or `}`
        }
        case LIT: {
          if (state === LIT) {
            const lit = this.lit
            if (this.litAt < lit.length) {
              if (b !== lit.charCodeAt(this.litAt++)) this.fail('an unknown literal')
              break
            }
            if (depth <= 1) {
              this.put(state, depth, count, isKey, num, i)
              this.valueEnds()
              ;({ state, depth, count, inField, strIsKey: isKey, num } = this)
              continue
            }
            state = stack[depth - 1] === OPEN_OBJ ? OBJ_NEXT : ARR_NEXT
          }
          // A value ended at depth 2 or more; `b` follows it.
          if (depth > 2 && state === OBJ_NEXT) {
            if (b === 0x2c && buf[i + 1] === 0x22) {
              i++
              isKey = true
              state = STR
              break
            }
            if (b === 0x7d) {
              if (stack[--depth] !== OPEN_OBJ) this.fail('a mismatched bracket')
              state = stack[depth - 1] === OPEN_OBJ ? OBJ_NEXT : ARR_NEXT
              break
            }
          }
          continue // read in the new state
        }
        case VALUE:
        case ARR_VALUE_OR_END:
          if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) break
          if (b === 0x5d && state === ARR_VALUE_OR_END) {
            if (depth <= 2) {
              this.put(state, depth, count, isKey, num, i)
              this.close(b)
              ;({ state, depth, count, inField, strIsKey: isKey, num } = this)
            } else {
              if (stack[--depth] !== OPEN_ARR) this.fail('a mismatched bracket')
              state = stack[depth - 1] === OPEN_OBJ ? OBJ_NEXT : ARR_NEXT
            }
            break
          }
          if (depth <= 1) {
            this.put(state, depth, count, isKey, num, i)
            this.valueStarts(b)
            ;({ state, depth, count, inField, strIsKey: isKey, num } = this)
            break
          }
          if (depth === 2 && inField) {
            count++
            const after = b === OPEN_OBJ ? this.wholeRow(buf, i) : -1
            if (after >= 0) {
              i = after
              state = ARR_NEXT
              continue
            }
          }
          if (b === 0x22) {
            isKey = false
            state = STR
          } else if (b === OPEN_OBJ || b === OPEN_ARR) {
            if (depth === MAX_DEPTH)
              throw new JsonSyntaxError(`the body is nested deeper than ${MAX_DEPTH} levels`)
            stack[depth++] = b
            state = b === OPEN_OBJ ? OBJ_KEY_OR_END : ARR_VALUE_OR_END
          } else if (b === 0x2d || (b >= 0x30 && b <= 0x39)) {
            num = b === 0x2d ? N_SIGN : b === 0x30 ? N_ZERO : N_INT
            state = NUM
            // An integer's digits in one go; what follows them goes through numStep.
            if (num === N_INT) while (i + 1 < n && buf[i + 1]! >= 0x30 && buf[i + 1]! <= 0x39) i++
          } else if (b === 0x74 || b === 0x66 || b === 0x6e) {
            const lit = b === 0x74 ? 'true' : b === 0x66 ? 'false' : 'null'
            this.lit = lit
            this.litAt = 1
            state = LIT
            // A literal whole in this chunk is compared in one go.
            if (i + lit.length <= n) {
              for (let k = 1; k < lit.length; k++)
                if (buf[i + k] !== lit.charCodeAt(k)) this.fail('an unknown literal')
              i += lit.length - 1
              this.litAt = lit.length
            }
          } else this.fail('an unexpected character')
          break
        case OBJ_KEY_OR_END:
        case OBJ_KEY:
        case COLON:
        case OBJ_NEXT:
        case ARR_NEXT:
          if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) break
          if (depth <= 1 || (depth === 2 && (b === 0x5d || b === 0x7d))) {
            // The top-level object's keys and commas, and the ends of its values.
            this.put(state, depth, count, isKey, num, i)
            this.structural(b)
            ;({ state, depth, count, inField, strIsKey: isKey, num } = this)
            break
          }
          if (state === COLON) {
            if (b !== 0x3a) this.fail('a missing colon')
            state = VALUE
          } else if (state === OBJ_NEXT && b === 0x2c) {
            state = OBJ_KEY
            if (buf[i + 1] === 0x22) {
              i++
              isKey = true
              state = STR
            }
          } else if (state === ARR_NEXT && b === 0x2c) {
            state = VALUE
            // The common `,{"` between rows read here, not one byte a turn.
            if (buf[i + 1] === OPEN_OBJ && depth < MAX_DEPTH) {
              i++
              if (depth === 2 && inField) {
                count++
                const after = this.wholeRow(buf, i)
                if (after >= 0) {
                  i = after
                  state = ARR_NEXT
                  continue
                }
              }
              stack[depth++] = OPEN_OBJ
              state = OBJ_KEY_OR_END
              if (buf[i + 1] === 0x22) {
                i++
                isKey = true
                state = STR
              }
            }
          } else if (b === 0x22 && (state === OBJ_KEY || state === OBJ_KEY_OR_END)) {
            isKey = true
            state = STR
          } else if (
            (b === 0x7d && (state === OBJ_NEXT || state === OBJ_KEY_OR_END)) ||
            (b === 0x5d && state === ARR_NEXT)
          ) {
            if (stack[--depth] !== (b === 0x7d ? OPEN_OBJ : OPEN_ARR))
              this.fail('a mismatched bracket')
            state = stack[depth - 1] === OPEN_OBJ ? OBJ_NEXT : ARR_NEXT
          } else {
            this.put(state, depth, count, isKey, num, i)
            this.structural(b) // says what is wrong
          }
          break
        default:
          if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) break
          this.put(state, depth, count, isKey, num, i)
          this.structural(b)
          ;({ state, depth, count, inField, strIsKey: isKey, num } = this)
      }
      i++
    }
    this.state = state
    this.depth = depth
    this.count = count
    this.strIsKey = isKey
    this.num = num
    this.base += n
  }

  /**
   * A row of the counted array from its `{` at `i`, read whole in one pass (issue #47): the
   * index after it, or -1 for the byte-wise states to read it. Rows nested past the reader's
   * depth are not tried again once they outnumber the rows it took by ROW_MISSES.
   */
  private wholeRow(buf: Uint8Array, i: number): number {
    if (this.rowMisses > this.rowHits + ROW_MISSES) return -1
    const after = rowNested(buf, i, ROW_DEPTH)
    if (after < 0) this.rowMisses++
    else this.rowHits++
    return after
  }

  /** The loop's locals back into the scanner, before a rare step reads them. */
  private put(state: number, depth: number, count: number, isKey: boolean, num: number, i: number) {
    this.state = state
    this.depth = depth
    this.count = count
    this.strIsKey = isKey
    this.num = num
    this.at = this.base + i
  }

  /** A byte of an escape in a string (rare in row data: kept out of the hot loop). */
  private escapeByte(state: number, b: number, inKey: boolean): number {
    if (inKey) this.keyByte(b)
    if (state === STR_HEX) {
      if (!isHex(b)) this.fail('a bad \\u escape')
      return --this.hexLeft === 0 ? STR : STR_HEX
    }
    if (b === 0x75) {
      this.hexLeft = 4
      return STR_HEX
    }
    if (!isSimpleEscape(b)) this.fail('a bad escape')
    return STR
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
    const depth = this.depth
    if (depth === 0) this.topIsObject = b === OPEN_OBJ
    else if (depth === 2 && this.inField) this.count++
    else if (depth === 1 && this.stack[0] === OPEN_OBJ && this.lastKey !== null) {
      if (this.lastKey === this.field) {
        // The field's value, at depth 1 of the top-level object: the last occurrence counts.
        this.fieldSeen = b === OPEN_ARR ? 'array' : 'other'
        this.count = 0
        this.inField = b === OPEN_ARR
      }
      const name = this.captureNames.get(this.lastKey)
      if (name !== undefined) {
        this.capturing = name
        this.captureStart = this.at
      }
    }
    if (b === OPEN_OBJ || b === OPEN_ARR) {
      if (depth === MAX_DEPTH)
        throw new JsonSyntaxError(`the body is nested deeper than ${MAX_DEPTH} levels`)
      this.stack[this.depth++] = b
      this.state = b === OPEN_OBJ ? OBJ_KEY_OR_END : ARR_VALUE_OR_END
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

  /** A number at the body's end (a top-level number). */
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

  /** A value ended (at `this.at`, exclusive): what may follow depends on the container. */
  private valueEnds(): void {
    const depth = this.depth
    if (depth === 1 && this.capturing !== null) {
      this.spans.set(this.capturing, { start: this.captureStart, end: this.at })
      this.capturing = null
    }
    this.state = depth === 0 ? DONE : this.stack[depth - 1] === OPEN_OBJ ? OBJ_NEXT : ARR_NEXT
  }

  private close(b: number): void {
    const open = this.depth === 0 ? 0 : this.stack[--this.depth]
    if ((b === 0x7d && open !== OPEN_OBJ) || (b === 0x5d && open !== OPEN_ARR))
      this.fail('a mismatched bracket')
    if (this.depth === 1 && b === 0x5d) this.inField = false
    this.at++ // the bracket belongs to the value
    this.valueEnds()
  }

  private keyByte(b: number): void {
    if (this.keyLong) return
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
    if (this.depth === 1) {
      // Escapes in a key (`"\u0072ows"` is `rows`) are read as the server reads them.
      this.lastKey = this.keyLong
        ? null
        : foldKey(JSON.parse(`"${Buffer.from(this.key).toString('utf8')}"`) as string)
    }
    return COLON
  }
}

/**
 * Calls `fn` with the bytes of each element of a JSON array given as bytes (already validated
 * by the scanner) until it returns true: `LIMIT ?` reads parameters one by one, without a
 * parse tree of the whole list.
 */
export function eachArrayElement(
  bytes: Buffer,
  fn: (element: Buffer, index: number) => boolean
): void {
  let depth = 0
  let inString = false
  let index = 0
  let start = -1
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!
    if (inString) {
      if (b === 0x5c) i++
      else if (b === 0x22) inString = false
      continue
    }
    if (isJsonSpace(b)) continue
    const atTop = depth === 1
    if ((atTop && b === 0x2c) || ((b === 0x7d || b === 0x5d) && depth === 1)) {
      if (start !== -1 && fn(bytes.subarray(start, i), index++)) return
      start = -1
      if (b !== 0x2c) return
      continue
    }
    if (b === 0x7d || b === 0x5d) {
      depth--
      continue
    }
    if (atTop && start === -1) start = i
    if (b === 0x22) inString = true
    else if (b === OPEN_OBJ || b === OPEN_ARR) depth++
  }
}

/** Element `index` of a JSON array given as bytes, parsed alone (undefined past the end). */
export function arrayElement(bytes: Buffer, index: number): unknown {
  let out: unknown = undefined
  eachArrayElement(bytes, (el, i) => {
    if (i !== index) return false
    out = JSON.parse(el.toString('utf8'))
    return true
  })
  return out
}

function isJsonSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09
}
