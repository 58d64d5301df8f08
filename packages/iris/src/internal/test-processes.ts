/**
 * @module Test support: start `iris` commands as real processes and read what they print; find and end the
 * processes a test left running, by a tag in their environment.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream, readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

export const IRIS_BIN = resolve(import.meta.dirname, '..', '..', 'bin', 'iris.js')

export type IrisProcess = {
  child: ChildProcess
  /** Everything printed to stdout so far. */
  stdout(): string
  /** Resolves with the first stdout line matching `re`. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>
  /** Resolves with the exit code (or 128 + signal). */
  exited: Promise<number>
}

/** Starts `iris ...args`; stderr goes to `<logDir>/<name>.log`. */
export function startIris(
  args: readonly string[],
  opts: { logDir: string; name: string; env?: Record<string, string> },
): IrisProcess {
  const child = spawn(process.execPath, [IRIS_BIN, ...args], {
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'info', LOG_FORMAT: 'json', ...(opts.env ?? {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const log = createWriteStream(join(opts.logDir, `${opts.name}.log`), { flags: 'a' })
  child.stderr!.pipe(log)
  let out = ''
  const listeners = new Set<() => void>()
  child.stdout!.setEncoding('utf8')
  child.stdout!.on('data', (c: string) => {
    out += c
    for (const l of listeners) l()
  })
  const exited = new Promise<number>((r) => child.once('exit', (code, sig) => r(code ?? (sig ? 128 : 1))))
  return {
    child,
    stdout: () => out,
    exited,
    waitFor(re, timeoutMs = 30_000) {
      return new Promise((resolvePromise, reject) => {
        const check = () => {
          const m = re.exec(out)
          if (m) {
            listeners.delete(check)
            clearTimeout(timer)
            resolvePromise(m)
          }
        }
        const timer = setTimeout(() => {
          listeners.delete(check)
          reject(
            new Error(
              `${opts.name}: no output matching ${re} within ${timeoutMs} ms; ` +
                `stdout so far: ${out.slice(-500)}; see ${opts.name}.log`,
            ),
          )
        }, timeoutMs)
        listeners.add(check)
        child.once('exit', () => setTimeout(check, 10))
        check()
      })
    },
  }
}

/** Runs `iris ...args` to completion. */
export async function runIris(
  args: readonly string[],
  opts: { logDir: string; name: string; env?: Record<string, string> },
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [IRIS_BIN, ...args], {
    env: { ...process.env, LOG_FORMAT: 'json', ...(opts.env ?? {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (c) => (stdout += c))
  child.stderr!.on('data', (c) => (stderr += c))
  const code = await new Promise<number>((r) => child.once('exit', (c) => r(c ?? 1)))
  return { code, stdout, stderr }
}

/**
 * `iris ...args` as the binary runs it (`cli-main.ts`: the same `runCli`, this process's environment plus `env`),
 * in this process: the CLI's own code without a process start, which is most of a short command's cost. Tests
 * start the binary itself where a process matters (a cluster, a worker, a signal).
 */
export async function runIrisHere(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { runCli } = await import('../cli.js')
  const out: string[] = []
  const err: string[] = []
  const io = {
    out: (l: string) => out.push(l),
    err: (l: string) => err.push(l),
    env: { ...process.env, LOG_FORMAT: 'json', ...env },
    stopped: Promise.resolve(),
  }
  const code = await runCli(args, io)
  return { code, stdout: out.map((l) => `${l}\n`).join(''), stderr: err.map((l) => `${l}\n`).join('') }
}

/** Processes alive now (zombies excluded) whose environment holds `IRIS_TEST_TAG=<tag>`: what a test started. */
export function taggedProcesses(tag: string): number[] {
  const want = `IRIS_TEST_TAG=${tag}`
  const out: number[] = []
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'latin1')
      if (/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2))) continue
      if (readFileSync(`/proc/${e}/environ`, 'latin1').split('\0').includes(want)) out.push(Number(e))
    } catch {
      // Gone, or not ours to read.
    }
  }
  return out
}

/** SIGKILL to every process `taggedProcesses(tag)` finds, so that a failing test leaves nothing running. */
export function killTagged(tag: string): number {
  const pids = taggedProcesses(tag)
  for (const p of pids) {
    try {
      process.kill(p, 'SIGKILL')
    } catch {
      // Gone.
    }
  }
  return pids.length
}

/** Whether `pid` is a living process (not a zombie waiting for its parent). */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2))
  } catch {
    return false
  }
}
