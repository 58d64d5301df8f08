/**
 * @module Reading one config file (YAML, or JSON by its `.json` extension) into plain
 * data, keeping enough of the document to say on which line a field was written.
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type * as Yaml from 'yaml'
import type { Document, LineCounter } from 'yaml'
import { RiggingError } from './errors.js'

/** A parsed config file: its data and a way back from a field path to its line. */
export type ConfigFile = {
  readonly path: string
  readonly data: Record<string, unknown>
  /** `line:col` (1-based) of the value at `path` in the file, when it can be found. */
  locate(path: readonly (string | number)[]): { line: number; col: number } | undefined
}

function parseError(file: string, line: number | undefined, col: number | undefined, what: string): RiggingError {
  const where = line === undefined ? file : `${file}:${line}:${col ?? 1}`
  return new RiggingError('CONFIG_PARSE', `${where}: ${what}; fix the syntax at that line and run again`)
}

/** Reads and parses `path`. Missing → CONFIG_NOT_FOUND; bad syntax → CONFIG_PARSE with file and line. */
export function readConfigFile(path: string): ConfigFile {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') {
      throw new RiggingError(
        'CONFIG_NOT_FOUND',
        `config file ${path} does not exist; check the path (relative paths start at ${process.cwd()})`,
        { cause: err },
      )
    }
    throw new RiggingError(
      'CONFIG_PARSE',
      `config file ${path} cannot be read (${code ?? 'error'}); make it a readable regular file`,
      { cause: err },
    )
  }
  const isJson = path.toLowerCase().endsWith('.json')
  // yaml (some 70 modules) is required when a file is read, not when rigging is imported
  const { LineCounter, isDocument, parseDocument } = createRequire(import.meta.url)('yaml') as typeof Yaml
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, merge: !isJson, uniqueKeys: true })
  let data: unknown
  if (isJson) {
    try {
      data = JSON.parse(text)
    } catch (err) {
      const at = lineCounter.linePos(jsonErrorOffset(text))
      throw parseError(path, at.line, at.col, `invalid JSON (${(err as Error).message.split('\n')[0]})`)
    }
  } else {
    const first = doc.errors[0]
    if (first !== undefined) {
      const pos = lineCounter.linePos(first.pos[0])
      throw parseError(path, pos.line, pos.col, `invalid YAML: ${first.message.split('\n')[0]}`)
    }
    try {
      data = doc.toJS({ maxAliasCount: 1000 })
    } catch (err) {
      throw parseError(path, undefined, undefined, `invalid YAML: ${(err as Error).message}`)
    }
  }
  if (data === null || data === undefined) data = {} // an empty file sets nothing
  if (typeof data !== 'object' || Array.isArray(data)) {
    throw new RiggingError(
      'CONFIG_INVALID',
      `${path}: the top level must be a mapping of field names to ` +
        `values, got ${Array.isArray(data) ? 'a list' : typeof data}`,
    )
  }
  const usable = isDocument(doc) && doc.errors.length === 0
  return {
    path,
    data: data as Record<string, unknown>,
    locate: (p) => (usable ? locate(doc, lineCounter, p) : undefined),
  }
}

function locate(
  doc: Document,
  lc: LineCounter,
  path: readonly (string | number)[],
): { line: number; col: number } | undefined {
  // The deepest node on the path that exists: for a missing field, its parent mapping.
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n), true) as { range?: [number, number, number] } | undefined
    if (node?.range !== undefined) return lc.linePos(node.range[0])
    if (n === 0 && doc.contents?.range) return lc.linePos(doc.contents.range[0])
  }
  return undefined
}

/**
 * The offset of the first syntax error in JSON text. Node 20's `JSON.parse` messages do not
 * say where the error is; this small scanner does, so the error can name the line.
 */
export function jsonErrorOffset(text: string): number {
  let i = 0
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++
  }
  const fail = (): never => {
    throw i
  }
  const value = (): void => {
    ws()
    const c = text[i]
    if (c === '{') {
      i++
      ws()
      if (text[i] === '}') return void i++
      for (;;) {
        ws()
        if (text[i] !== '"') fail()
        str()
        ws()
        if (text[i] !== ':') fail()
        i++
        value()
        ws()
        if (text[i] === ',') i++
        else if (text[i] === '}') return void i++
        else fail()
      }
    } else if (c === '[') {
      i++
      ws()
      if (text[i] === ']') return void i++
      for (;;) {
        value()
        ws()
        if (text[i] === ',') i++
        else if (text[i] === ']') return void i++
        else fail()
      }
    } else if (c === '"') str()
    else {
      const m = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i))
      if (m === null) fail()
      i += m![0].length
    }
  }
  const str = () => {
    i++
    while (i < text.length && text[i] !== '"') {
      if (text[i] === '\\') i++
      else if (text.charCodeAt(i) < 0x20) fail()
      i++
    }
    if (i >= text.length) fail()
    i++
  }
  try {
    value()
    ws()
    if (i < text.length) fail()
  } catch (at) {
    if (typeof at === 'number') return Math.min(at, text.length)
    throw at
  }
  return text.length
}
