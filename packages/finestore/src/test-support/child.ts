/** @module Test helper: run a fixture script in a real child Node process through tsx. */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { dirname, join } from 'node:path'

export const PKG_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const fixture = (name: string): string => join(PKG_DIR, 'src', 'fixtures', name)

export type Child = {
  readonly proc: ChildProcess
  /** Lines printed so far on stdout. */
  readonly lines: string[]
  /** Resolves with the first stdout line that `match` accepts. */
  waitFor(match: (line: string) => boolean): Promise<string>
  /** Resolves with exit code and signal. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>
}

export function runNode(args: readonly string[], env: NodeJS.ProcessEnv = {}): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: PKG_DIR,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const lines: string[] = []
  const waiters: { match: (l: string) => boolean; resolve: (l: string) => void }[] = []
  let buf = ''
  let stderr = ''
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString()
    let i: number
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      lines.push(line)
      for (const w of [...waiters]) if (w.match(line)) waiters.splice(waiters.indexOf(w), 1), w.resolve(line)
    }
  })
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((res) =>
    proc.on('close', (code, signal) => {
      if (buf) lines.push(buf)
      res({ code, signal, stderr })
    }),
  )
  return {
    proc,
    lines,
    exited,
    waitFor: (match) => {
      const hit = lines.find(match)
      if (hit !== undefined) return Promise.resolve(hit)
      return new Promise((resolve, reject) => {
        waiters.push({ match, resolve })
        exited.then((e) =>
          reject(new Error(`child exited (${e.code ?? e.signal}) before the expected line; stderr:\n${e.stderr}`)),
        )
      })
    },
  }
}

/** Runs the real `finestore` bin in a child process (stdout and stderr are pipes, not terminals). */
export async function finestoreBin(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; out: string; err: string }> {
  const child = runNode([join(PKG_DIR, 'bin', 'finestore.js'), ...args], env)
  const e = await child.exited
  return { code: e.code, out: child.lines.join('\n'), err: e.stderr }
}
