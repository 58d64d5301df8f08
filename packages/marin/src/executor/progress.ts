/**
 * @module Progress of running steps: the newest log line of each step (an iris job's), shown as one
 * line rewritten in place on a terminal (a line with `step=N/M` as a bar), or printed every few
 * seconds otherwise (CI logs). A step's first line (`started`, when the executor starts it) is shown
 * at once. Secret values this process knows are scrubbed from what is shown.
 */
import { scrubSecretValues } from '@marin/rigging'

/** Fields of a pino line that say nothing about progress. */
const NOISE = new Set(['level', 'time', 'pid', 'hostname', 'pkg', 'msg', 'step', 'err', 'v'])

/** `{"msg":"metrics","step":50,"train/loss":4.1}` → `metrics step=50 train/loss=4.1`; undefined for lines that are not
 * pino JSON. */
export function progressText(line: string): string | undefined {
  if (!line.startsWith('{')) return undefined
  let o: Record<string, unknown>
  try {
    o = JSON.parse(line) as Record<string, unknown>
  } catch {
    return undefined
  }
  if (typeof o.msg !== 'string') return undefined
  const fields: string[] = []
  // A step counter reads better first.
  if (typeof o.step === 'number') fields.push(`step=${o.step}${typeof o.of === 'number' ? `/${o.of}` : ''}`)
  for (const [k, v] of Object.entries(o)) {
    if (NOISE.has(k) || k === 'of' || fields.length >= 6) continue
    if (typeof v === 'number') fields.push(`${k}=${Number.isInteger(v) ? v : v.toPrecision(4)}`)
    else if (typeof v === 'string' && v.length <= 60) fields.push(`${k}=${v}`)
  }
  return [o.msg, ...fields].join(' ')
}

export type ProgressSink = {
  /** The newest thing `label` did. */
  update(label: string, text: string): void
  /** `label` is over: later lines of it are not shown. */
  finish(label: string): void
  /** Clears the terminal line (before other output). */
  done(): void
}

/**
 * @param out where lines go when not on a terminal
 * @param tty a terminal stream to rewrite one line on (e.g. `process.stdout` when it is a TTY)
 */
export function progressSink(
  out: (line: string) => void,
  opts: { readonly tty?: NodeJS.WriteStream; readonly everyMs?: number } = {},
): ProgressSink {
  const every = opts.everyMs ?? (opts.tty ? 250 : 5000)
  const latest = new Map<string, string>()
  const shown = new Map<string, string>()
  const seen = new Set<string>()
  const finished = new Set<string>()
  let lastAt = 0
  let width = 0
  let timer: NodeJS.Timeout | undefined
  const flush = (only?: string) => {
    lastAt = Date.now()
    if (opts.tty) {
      const [label, text] = [...latest].at(-1) ?? []
      if (!label) return
      const line = `  … ${label}: ${withBar(text!)}`.slice(0, Math.max(20, (opts.tty.columns || 100) - 1))
      opts.tty.write(`\r${line.padEnd(width)}`)
      width = line.length
      return
    }
    for (const [label, text] of latest) {
      if (shown.get(label) === text || (only !== undefined && label !== only)) continue
      shown.set(label, text)
      out(`  … ${label}: ${text}`)
    }
  }
  return {
    update(label, text) {
      if (finished.has(label)) return
      latest.delete(label)
      latest.set(label, scrubSecretValues(text))
      const first = !seen.has(label)
      seen.add(label)
      const wait = lastAt + every - Date.now()
      if (wait <= 0) flush()
      else if (first) flush(label)
      // A line held back now is shown when the interval has passed, even if the step says nothing more.
      if (wait > 0 && !timer) {
        timer = setTimeout(() => {
          timer = undefined
          flush()
        }, wait)
        timer.unref()
      }
    },
    finish(label) {
      finished.add(label)
      latest.delete(label)
    },
    done() {
      if (opts.tty && width > 0) opts.tty.write(`\r${' '.repeat(width)}\r`)
      width = 0
    },
  }
}

const BAR = 20

/** `training step=150/300 loss=3.2` → `training [##########----------] 150/300 loss=3.2`. */
function withBar(text: string): string {
  const m = /^(.*?)step=(\d+)\/(\d+)(.*)$/.exec(text)
  if (!m) return text
  const [, head, n, of, tail] = m
  const filled = Math.max(0, Math.min(BAR, Math.round((BAR * Number(n)) / Math.max(1, Number(of)))))
  return `${head}[${'#'.repeat(filled)}${'-'.repeat(BAR - filled)}] ${n}/${of}${tail}`
}
