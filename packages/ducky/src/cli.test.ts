import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, get as httpGet } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterEach, expect, test } from 'vitest'
import pkg from '../package.json' with { type: 'json' }
import { runCli } from './cli.js'
import { serve } from './server.js'
import { Demo, recordingLogger, unusedDemo } from './test-helpers.js'
import { tunnelService } from './tunnel.js'

const BIN = join(import.meta.dirname, '..', 'bin', 'ducky.mjs')
const cleanup: (() => unknown)[] = []
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c()
})

function run(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  const exited = once(child, 'exit').then(([code]) => code as number)
  return { child, exited, stderr: () => stderr }
}

test.each([
  [['tunnel', '--via', '127.0.0.1:1', '--listen', '0'], /required option '--to/],
  [
    ['tunnel', '--to', 'nope', '--via', '127.0.0.1:1', '--listen', '0'],
    /'--to <host:port>' argument 'nope' is invalid/,
  ],
  [
    ['tunnel', '--to', '127.0.0.1:80', '--via', '127.0.0.1:1', '--listen', 'eighty'],
    /'--listen <port>' argument 'eighty' is invalid/,
  ],
  [
    ['tunnel', '--to', '127.0.0.1:80', '--via', '127.0.0.1:1', '--listen', '0', '--token-file', '/no/such/token'],
    /--token-file: cannot read \/no\/such\/token/,
  ],
  [['frobnicate'], /unknown command 'frobnicate'/],
])('bad usage %j exits 2 and says what is wrong', async (args, message) => {
  const p = run(args)
  expect(await p.exited).toBe(2)
  expect(p.stderr()).toMatch(message)
})

test('no arguments print help and exit 2; --version prints the package version', async () => {
  const none = run([])
  expect(await none.exited).toBe(2)
  expect(none.stderr()).toMatch(/Usage: ducky/)
  const out: string[] = []
  expect(
    await runCli(['--version'], { out: (l) => out.push(l), err: () => {}, env: {}, stopped: Promise.resolve() }),
  ).toBe(0)
  expect(out).toEqual([pkg.version])
})

test('ducky tunnel forwards an HTTP request, then stops cleanly on SIGTERM', async () => {
  const http = createServer((req, res) => res.end(`via cli ${req.url}`))
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r))
  cleanup.push(() => new Promise((r) => http.close(r)))
  const httpPort = (http.address() as AddressInfo).port
  const log = recordingLogger()
  const server = await serve(Demo, unusedDemo, {
    logger: log,
    token: 'cli-token',
    services: [tunnelService({ allow: [`127.0.0.1:${httpPort}`], logger: log })],
  })
  cleanup.push(() => server.shutdown({ graceMs: 100 }))

  const p = run(['tunnel', '--to', `127.0.0.1:${httpPort}`, '--via', server.address, '--listen', '0'], {
    DUCKY_TOKEN: 'cli-token',
  })
  cleanup.push(() => p.child.kill('SIGKILL'))
  const [line] = (await once(createInterface({ input: p.child.stdout }), 'line')) as [string]
  const { listen } = JSON.parse(line) as { listen: string }
  const port = Number(listen.split(':').pop())
  const body = await new Promise<string>((resolve, reject) =>
    httpGet({ host: '127.0.0.1', port, path: '/x', agent: false }, (res) => {
      let s = ''
      res.on('data', (d: Buffer) => (s += d.toString()))
      res.on('end', () => resolve(s))
    }).on('error', reject),
  )
  expect(body).toBe('via cli /x')
  p.child.kill('SIGTERM')
  expect(await p.exited).toBe(0)
})

test('ducky tunnel to a refused target exits 1 with PERMISSION_DENIED', async () => {
  const log = recordingLogger()
  const server = await serve(Demo, unusedDemo, { logger: log, services: [tunnelService({ allow: [], logger: log })] })
  cleanup.push(() => server.shutdown({ graceMs: 100 }))
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(['tunnel', '--to', '127.0.0.1:22', '--via', server.address, '--listen', '0'], {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    env: {},
    stopped: new Promise(() => {}),
  })
  expect(code).toBe(1)
  expect(err.join('\n')).toMatch(/PERMISSION_DENIED: tunnel target 127\.0\.0\.1:22 is not allowed/)
  expect(out).toEqual([])
})

test('ducky health prints SERVING and exits 0', async () => {
  const server = await serve(Demo, unusedDemo, { logger: recordingLogger() })
  cleanup.push(() => server.shutdown({ graceMs: 100 }))
  const out: string[] = []
  const code = await runCli(['health', server.address], {
    out: (l) => out.push(l),
    err: () => {},
    env: {},
    stopped: Promise.resolve(),
  })
  expect({ code, out }).toEqual({ code: 0, out: ['SERVING'] })
})
