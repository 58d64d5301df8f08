/**
 * @module Regular expressions from task files (`filter_list` regexes, `regexes_to_ignore`), run with a
 * time budget. JavaScript's engine backtracks, and a pattern such as `^(a+)+$` takes time exponential in
 * its input; a linear-time engine (re2) would be a native addon, so instead the matching runs on a worker
 * thread while the caller waits (synchronously, on an Atomics slot) for at most the budget. A pattern past
 * it is refused with a BAD_CONFIG error naming the task, the field and the pattern; the worker is ended
 * (V8 stops a regex when its thread is terminated) and a fresh one started on the next call.
 */
import { MessageChannel, type MessagePort, Worker, receiveMessageOnPort } from 'node:worker_threads'
import { MarinError } from '../errors.js'

/** Longest one regex call may run. @default 1000 ms; legitimate patterns on model outputs take microseconds. */
export const REGEX_BUDGET_MS = 1000

/** A pattern to run: its JavaScript source and flags, and how errors name it (task file, field, Python text). */
export type SandboxedRegex = { readonly re: RegExp; readonly what: string; readonly pattern: string }

type Request =
  | { op: 'findall'; source: string; flags: string; text: string }
  | { op: 'strip'; patterns: { source: string; flags: string }[]; text: string }
type Reply = { ok: true; value: unknown } | { ok: false; message: string }

// Plain JavaScript with no imports, so the worker starts fast and without a TypeScript loader.
// state[0]: 0 while working, 1 when the reply is posted (or the worker is ready); state[1]: the pattern running.
const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads')
const { port, state } = workerData
const cache = new Map()
const compile = (source, flags) => {
  const key = flags + '/' + source
  let re = cache.get(key)
  if (!re) cache.set(key, (re = new RegExp(source, flags)))
  re.lastIndex = 0
  return re
}
function findall(re, text) {
  const groups = new RegExp(re.source + '|', re.flags.replace('g', '')).exec('').length - 1
  const out = []
  for (const m of text.matchAll(re)) {
    if (groups === 0) out.push(m[0])
    else if (groups === 1) out.push(m[1] ?? '')
    else out.push(m.slice(1).map((g) => g ?? ''))
  }
  return out
}
port.on('message', (req) => {
  let reply
  try {
    if (req.op === 'findall') {
      Atomics.store(state, 1, 0)
      reply = { ok: true, value: findall(compile(req.source, req.flags), req.text) }
    } else {
      let x = req.text
      req.patterns.forEach((p, i) => {
        Atomics.store(state, 1, i)
        x = x.replace(compile(p.source, p.flags), '')
      })
      reply = { ok: true, value: x }
    }
  } catch (err) {
    reply = { ok: false, message: String(err && err.message) }
  }
  port.postMessage(reply)
  Atomics.store(state, 0, 1)
  Atomics.notify(state, 0)
})
Atomics.store(state, 0, 1)
Atomics.notify(state, 0)
`

type Runner = { worker: Worker; port: MessagePort; state: Int32Array }
let runner: Runner | undefined

/** Started on first use; unref'd, so an idle one never keeps the process alive. */
function start(): Runner {
  const { port1, port2 } = new MessageChannel()
  const state = new Int32Array(new SharedArrayBuffer(8))
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { port: port2, state }, transferList: [port2] })
  worker.unref()
  port1.unref()
  // Waits for the worker to load (it needs no loader, so this is quick); a refusal below starts from ready.
  if (Atomics.wait(state, 0, 0, 30_000) === 'timed-out') {
    void worker.terminate()
    throw new MarinError('BAD_CONFIG', 'the regex worker thread did not start within 30 s; retry')
  }
  return { worker, port: port1, state }
}

function call(req: Request, name: (running: number) => SandboxedRegex, budgetMs: number): unknown {
  const r = (runner ??= start())
  Atomics.store(r.state, 0, 0)
  r.port.postMessage(req)
  if (Atomics.wait(r.state, 0, 0, budgetMs) === 'timed-out') {
    const running = name(Atomics.load(r.state, 1))
    runner = undefined
    void r.worker.terminate()
    throw new MarinError(
      'BAD_CONFIG',
      `${running.what}: the pattern ${JSON.stringify(running.pattern)} is refused: it did not finish within ` +
        `${budgetMs} ms on a ${req.text.length}-character text (it backtracks without bound, as nested ` +
        'quantifiers such as (a+)+ do); rewrite it without nested or overlapping repetition',
    )
  }
  const reply = receiveMessageOnPort(r.port)?.message as Reply | undefined
  if (!reply) throw new MarinError('BAD_CONFIG', `${name(0).what}: the regex worker gave no reply; retry`)
  if (!reply.ok) throw new MarinError('BAD_CONFIG', `${name(0).what}: ${reply.message}`)
  return reply.value
}

/** Python's `re.findall(pattern, text)`: whole matches, or group 1, or tuples of all groups; `re` must have `g`. */
export function findallBounded(r: SandboxedRegex, text: string, budgetMs = REGEX_BUDGET_MS): (string | string[])[] {
  return call({ op: 'findall', source: r.re.source, flags: r.re.flags, text }, () => r, budgetMs) as (
    | string
    | string[]
  )[]
}

/** `text` with every match of each pattern removed, in order (lm-eval's `regexes_to_ignore`). */
export function stripBounded(rs: readonly SandboxedRegex[], text: string, budgetMs = REGEX_BUDGET_MS): string {
  if (rs.length === 0) return text
  const patterns = rs.map((r) => ({ source: r.re.source, flags: r.re.flags }))
  return call({ op: 'strip', patterns, text }, (i) => rs[i] ?? rs[0]!, budgetMs) as string
}
