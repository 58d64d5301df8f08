/**
 * @module `marin serve` as a child process: start it on a checkpoint on a free loopback port, wait
 * for the line naming its URL, and stop it with SIGTERM (it drains in-flight requests first).
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { MarinError } from '../errors.js'

const MARIN_BIN = fileURLToPath(new URL('../../bin/marin.js', import.meta.url))
const READY = /^serving (\S+) at (http:\/\/\S+\/v1)$/m

export type ServeProcessOptions = {
  /** What `--model-checkpoint` takes: a directory or a finestore `ARTIFACT[@VERSION]`. */
  readonly checkpoint: string
  readonly tokenizer?: string
  /** The Marin prefix whose finestore holds the artifact. */
  readonly prefix: string
  /** Give up when the server has not answered by then. @default 120000 */
  readonly readyTimeoutMs?: number
}

/** A running `marin serve`. */
export type ServeProcess = {
  /** Base URL of the OpenAI-compatible API, ending in `/v1`. */
  readonly baseUrl: string
  /** The model id it reports. */
  readonly name: string
  readonly pid: number
  /** SIGTERM, then waits for the exit (SIGKILL after `graceMs`). */
  close(graceMs?: number): Promise<void>
}

/**
 * Starts `marin serve --model-checkpoint <checkpoint> --port 0` and resolves once it listens.
 * @example const server = await serveProcess({ checkpoint: 'models/gpt-brown@1', prefix })
 */
export function serveProcess(o: ServeProcessOptions): Promise<ServeProcess> {
  const args = [
    MARIN_BIN,
    'serve',
    '--model-checkpoint',
    o.checkpoint,
    '--port',
    '0',
    ...(o.tokenizer ? ['--tokenizer', o.tokenizer] : []),
  ]
  const child = spawn(process.execPath, args, {
    env: { ...process.env, MARIN_PREFIX: o.prefix },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr = (stderr + d).slice(-4000)
  })
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()))
  const close = async (graceMs = 10_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
    await exited
    clearTimeout(timer)
  }
  return new Promise<ServeProcess>((resolve, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer)
      void close(1000)
      reject(
        new MarinError(
          'STEP_FAILED',
          `marin serve --model-checkpoint ${o.checkpoint}: ${why}${stderr.trim() ? `\n${stderr.trim()}` : ''}`,
        ),
      )
    }
    const timer = setTimeout(
      () => fail(`not listening after ${o.readyTimeoutMs ?? 120_000} ms`),
      o.readyTimeoutMs ?? 120_000,
    )
    child.once('error', (err) => fail(`cannot start (${err.message})`))
    child.once('exit', (code, signal) => fail(`exited (${signal ?? `code ${code}`}) before listening`))
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d
      const m = READY.exec(stdout)
      if (!m) return
      clearTimeout(timer)
      child.removeAllListeners('exit')
      child.stdout.removeAllListeners('data').resume()
      resolve({ baseUrl: m[2]!, name: m[1]!, pid: child.pid!, close })
    })
  })
}
