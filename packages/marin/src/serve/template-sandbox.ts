/**
 * @module Jinja templates from files others made (a checkpoint's chat template, a task's `doc_to_text`),
 * rendered within limits: `range()` makes at most 100,000 items (Jinja2's sandbox, which transformers
 * uses, has the same MAX_RANGE), no value the template makes may exceed the output size, and rendering
 * stops at a time budget, checked inside @huggingface/jinja's interpreter loop. A template past a limit
 * fails with BAD_TEMPLATE naming it. This bounds the time on the calling thread; `chat-template-worker`
 * also keeps it off the server's event loop and bounds its memory.
 */
import { Environment, Interpreter, Template } from '@huggingface/jinja'
import { MarinError } from '../errors.js'

/** Jinja2's sandbox `MAX_RANGE`: the most items one `range()` may make. */
export const MAX_RANGE = 100_000

export type TemplateLimits = {
  /** Most items from one `range()`. @default {@link MAX_RANGE} */
  readonly maxRange: number
  /** Most characters in any string the template makes, its output included. @default 8 Mi */
  readonly maxOutputChars: number
  /** Most items in any list the template makes. @default 1,000,000 */
  readonly maxItems: number
  /** Rendering stops after this long. @default 2000 */
  readonly timeBudgetMs: number
}

export const DEFAULT_TEMPLATE_LIMITS: TemplateLimits = {
  maxRange: MAX_RANGE,
  maxOutputChars: 8 * 2 ** 20,
  maxItems: 1_000_000,
  timeBudgetMs: 2000,
}

// @huggingface/jinja's d.ts re-exports its runtime from an extensionless path that NodeNext resolution does not
// follow, so Interpreter and Environment arrive untyped; the little used here is declared.
type Value = { readonly type: string; readonly value: unknown }
type Env = { set(name: string, value: unknown): unknown }
type InterpreterLike = { evaluate(statement: unknown, environment: Env): Value; run(program: unknown): Value }
const BaseInterpreter = Interpreter as new (env: Env) => InterpreterLike

/** Python's `range`, refusing more than `max` items before making any. */
function cappedRange(max: number, refuse: (why: string) => never) {
  return (start: number, stop?: number, step = 1): number[] => {
    const [from, to] = stop === undefined ? [0, start] : [start, stop]
    if (![from, to, step].every(Number.isFinite)) throw new Error('range() takes numbers')
    if (step === 0) throw new Error('range() step must not be zero')
    const n = Math.max(0, Math.ceil((to - from) / step))
    if (!(n <= max)) refuse(`range(${[from, to, step].join(', ')}) makes ${n} items, more than the ${max} allowed`)
    return Array.from({ length: n }, (_, i) => from + i * step)
  }
}

/** @huggingface/jinja's `strftime_now` (its globals are not exported): the few codes it knows. */
function strftimeNow(format: string): string {
  const d = new Date()
  const pad2 = (n: number) => String(n).padStart(2, '0')
  const codes: Record<string, () => string> = {
    '%Y': () => String(d.getFullYear()),
    '%m': () => pad2(d.getMonth() + 1),
    '%d': () => pad2(d.getDate()),
    '%b': () => new Intl.DateTimeFormat(undefined, { month: 'short' }).format(d),
    '%B': () => new Intl.DateTimeFormat(undefined, { month: 'long' }).format(d),
    '%H': () => pad2(d.getHours()),
    '%M': () => pad2(d.getMinutes()),
    '%%': () => '%',
  }
  return format.replace(/%[YmdbBHM%]/g, (t) => codes[t]!())
}

/**
 * The interpreter, checked: every node's evaluation looks at the clock and at the size of its value. (The
 * clock on every node: a loop with an empty body evaluates only a few nodes per pass, each pass costly.)
 */
class BoundedInterpreter extends BaseInterpreter {
  constructor(
    env: Env,
    private readonly limits: TemplateLimits,
    private readonly deadline: number,
    private readonly refuse: (why: string) => never,
  ) {
    super(env)
  }

  override evaluate(statement: unknown, environment: Env): Value {
    if (performance.now() > this.deadline)
      this.refuse(`rendering took longer than the ${this.limits.timeBudgetMs} ms allowed`)
    const v = super.evaluate(statement, environment)
    if (typeof v.value === 'string' && v.value.length > this.limits.maxOutputChars)
      this.refuse(
        `it makes a text of ${v.value.length} characters, more than the ${this.limits.maxOutputChars} allowed`,
      )
    if (Array.isArray(v.value) && v.value.length > this.limits.maxItems)
      this.refuse(`it makes a list of ${v.value.length} items, more than the ${this.limits.maxItems} allowed`)
    return v
  }
}

/**
 * A parsed template that renders within `limits`. Parse errors throw from the constructor (as
 * @huggingface/jinja's); a limit passed is a BAD_TEMPLATE MarinError naming `name`; the template's own
 * errors (`raise_exception`, a bad filter) throw as they are.
 * @example new SandboxedTemplate('{{ x }}', 'task t: doc_to_text').render({ x: 1 }) // '1'
 */
export class SandboxedTemplate {
  private readonly template: Template

  constructor(
    source: string,
    /** How errors name the template, e.g. `ckpt/tokenizer_config.json: chat_template`. */
    readonly name: string,
    readonly limits: TemplateLimits = DEFAULT_TEMPLATE_LIMITS,
  ) {
    this.template = new Template(source)
  }

  /** The template's text for `items`; `name` (default: the template's) names it in errors. */
  render(items: Record<string, unknown>, name = this.name): string {
    const refuse = (why: string): never => {
      throw new MarinError('BAD_TEMPLATE', `${name}: the template is refused: ${why}; fix the template`)
    }
    // As Template.render, with range() capped: its globals, then the caller's variables.
    const env = new Environment() as Env
    const globals: Record<string, unknown> = {
      false: false,
      true: true,
      none: null,
      raise_exception: (msg: string) => {
        throw new Error(msg)
      },
      range: cappedRange(this.limits.maxRange, refuse),
      strftime_now: strftimeNow,
      True: true,
      False: false,
      None: null,
    }
    for (const [k, v] of Object.entries({ ...globals, ...items })) env.set(k, v)
    const interpreter = new BoundedInterpreter(env, this.limits, performance.now() + this.limits.timeBudgetMs, refuse)
    return interpreter.run(this.template.parsed).value as string
  }
}
