/**
 * @module Python literals as `ast.literal_eval` reads them, for the text of lm-eval fields such as
 * `doc_to_choice: "{{ ['it\\'s', 'b'] }}"`: lists and tuples (as arrays), dicts, strings in single or
 * double quotes (escapes, `r` prefixes, adjacent strings joined), numbers, True/False/None. Nesting is
 * bounded (Python's own parser stops at 200) so a hostile text cannot overflow the stack; a text that is
 * not a literal fails naming the field and the character position.
 */
import { MarinError } from '../errors.js'

/** Deepest nesting of lists, tuples and dicts read. */
export const MAX_LITERAL_DEPTH = 100

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '\\': '\\',
  "'": "'",
  '"': '"',
  a: '\x07',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
}

/** Reads one literal from `src`; `what` names the field in errors. */
class Reader {
  i = 0
  constructor(
    readonly src: string,
    readonly what: string,
  ) {}

  fail(why: string, at = this.i): never {
    const near = JSON.stringify(this.src.slice(Math.max(0, at - 10), at + 10))
    throw new MarinError(
      'BAD_CONFIG',
      `${this.what}: not a Python literal: ${why} at position ${at} (near ${near}); ` +
        "write a list such as ['a', 'b']",
    )
  }

  space() {
    while (this.i < this.src.length && /\s/.test(this.src[this.i]!)) this.i++
  }

  value(depth: number): unknown {
    this.space()
    const c = this.src[this.i]
    if (c === undefined) this.fail('the text ends where a value should be')
    if (c === '[' || c === '(') return this.sequence(c === '[' ? ']' : ')', depth)
    if (c === '{') return this.dict(depth)
    if (c === "'" || c === '"' || (/[rRuU]/.test(c) && /['"]/.test(this.src[this.i + 1] ?? ''))) return this.strings()
    const word = /^(True|False|None)(?![\w])/.exec(this.src.slice(this.i, this.i + 6))
    if (word) {
      this.i += word[1]!.length
      return word[1] === 'True' ? true : word[1] === 'False' ? false : null
    }
    const num =
      /^[+-]?\s*(?:0[xX][\da-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?)/.exec(
        this.src.slice(this.i, this.i + 400),
      )
    if (num) {
      this.i += num[0].length
      const t = num[0].replace(/[\s_]/g, '')
      const neg = t.startsWith('-')
      const body = t.replace(/^[+-]/, '')
      const n = /^0[xob]/i.test(body) ? Number(body.toLowerCase()) : Number(body)
      if (Number.isNaN(n)) this.fail(`${JSON.stringify(num[0])} is not a number`, this.i - num[0].length)
      return neg ? -n : n
    }
    return this.fail(`unexpected ${JSON.stringify(c)}`)
  }

  sequence(close: string, depth: number): unknown[] {
    if (depth >= MAX_LITERAL_DEPTH) this.fail(`nested deeper than ${MAX_LITERAL_DEPTH} levels`)
    this.i++
    const out: unknown[] = []
    for (;;) {
      this.space()
      if (this.src[this.i] === close) {
        this.i++
        return out
      }
      out.push(this.value(depth + 1))
      this.space()
      const c = this.src[this.i]
      if (c === ',') this.i++
      else if (c !== close) this.fail(`expected "," or "${close}"`)
    }
  }

  dict(depth: number): Record<string, unknown> {
    if (depth >= MAX_LITERAL_DEPTH) this.fail(`nested deeper than ${MAX_LITERAL_DEPTH} levels`)
    this.i++
    const out = new Map<string, unknown>()
    for (;;) {
      this.space()
      if (this.src[this.i] === '}') {
        this.i++
        return Object.fromEntries(out)
      }
      const at = this.i
      const key = this.value(depth + 1)
      if (typeof key !== 'string' && typeof key !== 'number') this.fail('a dict key must be a string or number', at)
      this.space()
      if (this.src[this.i] !== ':') this.fail('expected ":"')
      this.i++
      out.set(String(key), this.value(depth + 1))
      this.space()
      const c = this.src[this.i]
      if (c === ',') this.i++
      else if (c !== '}') this.fail('expected "," or "}"')
    }
  }

  /** One or more adjacent string literals, joined as Python joins them. */
  strings(): string {
    let out = ''
    do {
      out += this.string()
      this.space()
    } while (/['"]/.test(this.src[this.i] ?? '') || /^[rRuU]['"]/.test(this.src.slice(this.i, this.i + 2)))
    return out
  }

  string(): string {
    let raw = false
    if (/[rRuU]/.test(this.src[this.i]!)) raw = /[rR]/.test(this.src[this.i++]!)
    const start = this.i
    const q = this.src[this.i]!
    const triple = this.src.startsWith(q.repeat(3), this.i)
    const end = triple ? q.repeat(3) : q
    this.i += end.length
    let out = ''
    for (;;) {
      if (this.i >= this.src.length) this.fail('a string is not closed', start)
      if (this.src.startsWith(end, this.i)) {
        this.i += end.length
        return out
      }
      const c = this.src[this.i]!
      if (c === '\n' && !triple) this.fail('a string is not closed on its line', start)
      if (c !== '\\') {
        out += c
        this.i++
        continue
      }
      const e = this.src[this.i + 1]
      if (e === undefined) this.fail('a string is not closed', start)
      if (raw) {
        out += c + e
        this.i += 2
        continue
      }
      this.i += 2
      if (Object.hasOwn(SIMPLE_ESCAPES, e)) out += SIMPLE_ESCAPES[e]
      else if (e === '\n') continue
      else if (e === 'x' || e === 'u' || e === 'U') {
        const len = e === 'x' ? 2 : e === 'u' ? 4 : 8
        const hex = this.src.slice(this.i, this.i + len)
        if (!new RegExp(`^[\\da-fA-F]{${len}}$`).test(hex)) this.fail(`a \\${e} escape needs ${len} hex digits`)
        const cp = Number.parseInt(hex, 16)
        if (cp > 0x10ffff) this.fail(`\\${e}${hex} is not a code point`)
        out += String.fromCodePoint(cp)
        this.i += len
      } else if (/[0-7]/.test(e)) {
        const oct = /^[0-7]{0,2}/.exec(this.src.slice(this.i))![0]
        out += String.fromCodePoint(Number.parseInt(e + oct, 8))
        this.i += oct.length
      } else out += `\\${e}` // Python keeps an unknown escape as written.
    }
  }
}

/**
 * The value of a Python literal, as `ast.literal_eval(src)` gives it (tuples and sets as arrays, dicts as
 * objects). Throws a BAD_CONFIG MarinError naming `what` and the position when `src` is not one.
 * @example pythonLiteral(`["it\\'s", 'b']`, 'doc_to_choice') // ["it's", 'b']
 */
export function pythonLiteral(src: string, what: string): unknown {
  const r = new Reader(src, what)
  const v = r.value(0)
  r.space()
  if (r.i < src.length) r.fail('text follows the value')
  return v
}
