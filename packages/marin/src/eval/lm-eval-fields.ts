/**
 * @module The values of lm-evaluation-harness `doc_to_*` fields for one document: Jinja templates
 * rendered with `@huggingface/jinja` as the harness renders them (`keep_trailing_newline`, Python's
 * `list.index`), column names, constants and built-in `!function` equivalents. Task files come from
 * others, so templates render in the sandbox (`range()` capped, output size and time bounded: a
 * BAD_TEMPLATE error names the task file and field) and list texts are read as Python literals.
 */
import { MarinError, isMarinError } from '../errors.js'
import { SandboxedTemplate } from '../serve/template-sandbox.js'
import { pythonLiteral } from './python-literal.js'
import type { Doc, DocFunction } from './lm-eval-functions.js'

/** A `doc_to_*` field: a Jinja template or column name, a constant (index or list), or a function. */
export type DocField = string | number | readonly unknown[] | DocFunction

const templates = new Map<string, SandboxedTemplate>()

/** Python list methods Jinja here lacks, rewritten to helper calls: `xs.index(v)` → `__index(xs, v)`. */
const pythonisms = (src: string) => src.replace(/([A-Za-z_][\w.]*(?:\[[^\]]*\])*)\.index\(/g, '__index($1, ')
const unwrap = (v: unknown): unknown =>
  typeof v === 'object' && v !== null && 'value' in v && 'type' in v ? unwrap((v as { value: unknown }).value) : v
const helpers = {
  __index: (xs: unknown, v: unknown) => {
    const arr = (unwrap(xs) as unknown[]).map(unwrap)
    const i = arr.indexOf(unwrap(v))
    if (i < 0) throw new Error(`${JSON.stringify(unwrap(v))} is not in the list ${JSON.stringify(arr)}`)
    return i
  },
}

/** A template's text for one document; `what` names the field in errors. */
export function render(src: string, doc: Doc, what: string): string {
  let t = templates.get(src)
  if (!t) {
    try {
      t = new SandboxedTemplate(pythonisms(src), what)
    } catch (err) {
      throw new MarinError('BAD_CONFIG', `${what}: not a valid Jinja template: ${(err as Error).message}`)
    }
    templates.set(src, t)
  }
  try {
    // The harness's Jinja environment keeps a template's trailing newline; this renderer drops one.
    return t.render({ ...doc, ...helpers }, what) + (src.endsWith('\n') ? '\n' : '')
  } catch (err) {
    if (isMarinError(err, 'BAD_TEMPLATE')) throw err
    throw new MarinError('BAD_CONFIG', `${what}: rendering failed: ${(err as Error).message}`)
  }
}

/**
 * A `doc_to_*` field's value for one document, as lm-eval computes it: a column name gives the
 * column; a template that is one `{{ expression }}` gives the expression's value (lists stay
 * lists); any other template gives its text; constants and functions give themselves / their result.
 */
export function value(f: DocField, doc: Doc, what: string): unknown {
  if (typeof f === 'function') return f(doc)
  if (typeof f !== 'string') return f
  if (Object.hasOwn(doc, f)) return doc[f]
  const single = /^\s*\{\{([\s\S]*)\}\}\s*$/.exec(f)
  if (single && !single[1]!.includes('}}') && !single[1]!.includes('{{'))
    return JSON.parse(render(`{{ (${single[1]}) | tojson }}`, doc, what)) as unknown
  return render(f, doc, what)
}

/** A field that is a column gives the column's text; any other string is a template (`description`). */
export function text(f: string, doc: Doc, what: string): string {
  return Object.hasOwn(doc, f) ? String(doc[f]) : render(f, doc, what)
}

/** A target or text that names a choice: a number, or a string of digits (with `doc_to_choice` set). */
export const asIndex = (v: unknown): number | undefined =>
  typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : undefined

/**
 * A rendered target that looks like a Python list (`['a', "b"]`, starts with `[` and ends with `]`) as the
 * list `ast.literal_eval` gives; anything else, or a text that does not read as a literal, unchanged (as the
 * harness falls back to the text).
 */
export function listLiteral(v: unknown): unknown {
  if (typeof v !== 'string') return v
  const s = v.trim()
  if (!(s.startsWith('[') && s.endsWith(']'))) return v
  try {
    return pythonLiteral(s, 'target')
  } catch (err) {
    if (isMarinError(err, 'BAD_CONFIG')) return v
    throw err
  }
}

/** `doc_to_choice`'s list for one document: a template's text is read as a Python list literal, as lm-eval does. */
export function choicesOf(f: DocField, doc: Doc, what: string): unknown {
  const v = value(f, doc, what)
  // As the harness: a template's text must be a literal (ast.literal_eval raises otherwise).
  return typeof v === 'string' ? pythonLiteral(v.trim(), what) : v
}
