import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeFileSync } from 'node:fs'
import { SecretStore } from '@marin/rigging'
import { afterAll, afterEach, expect, test } from 'vitest'
import { connect } from './client.js'
import { RpcError } from './errors.js'
import { checkHealth } from './health-check.js'
import { serve, type DuckyServer } from './server.js'
import { Demo, recordingLogger, unusedDemo } from './test-helpers.js'

const impl = { ...unusedDemo, echo: ({ text }: { text: string }) => ({ text }) }

const open: { close(): void }[] = []
const servers: DuckyServer[] = []
afterEach(async () => {
  for (const c of open.splice(0)) c.close()
  await Promise.all(servers.splice(0).map((s) => s.shutdown({ graceMs: 100 })))
})

const TOKEN = 'tok-7f3a9c-right'

async function authServer(
  token: Parameters<typeof serve>[2] extends infer O ? (O extends { token?: infer T } ? T : never) : never = TOKEN,
) {
  const log = recordingLogger()
  const server = await serve(Demo, impl, { token, logger: log })
  servers.push(server)
  return { server, log }
}

function client(address: string, token?: string, extra: Parameters<typeof connect>[2] = {}) {
  const c = connect(Demo, address, { logger: recordingLogger(), ...(token === undefined ? {} : { token }), ...extra })
  open.push(c)
  return c
}

test('a call without a token is refused with UNAUTHENTICATED and logged without any token', async () => {
  const { server, log } = await authServer()
  const err = (await client(server.address)
    .echo({ text: 'x' })
    .catch((e: unknown) => e)) as RpcError
  expect(err).toBeInstanceOf(RpcError)
  expect(err.code).toBe('UNAUTHENTICATED')
  expect(err.details).toMatch(/missing bearer token/)
  const refusal = log.lines.find((l) => l.msg === 'refused call: bad bearer token')
  expect(refusal?.obj).toMatchObject({ method: '/ducky.test.Demo/echo', reason: 'missing' })
})

test('a wrong token is refused, and neither token appears in the log', async () => {
  const { server, log } = await authServer()
  const wrong = 'tok-7f3a9c-WRONG-and-longer'
  const err = (await client(server.address, wrong)
    .echo({ text: 'x' })
    .catch((e: unknown) => e)) as RpcError
  expect(err.code).toBe('UNAUTHENTICATED')
  const short = (await client(server.address, 'x')
    .echo({ text: 'x' })
    .catch((e: unknown) => e)) as RpcError
  expect(short.code).toBe('UNAUTHENTICATED')
  const text = JSON.stringify(log.lines)
  expect(text).toContain('"reason":"wrong"')
  expect(text).not.toContain(wrong)
  expect(text).not.toContain(TOKEN)
})

test('the right token is accepted', async () => {
  const { server, log } = await authServer()
  expect(await client(server.address, TOKEN).echo({ text: 'in' })).toEqual({ text: 'in' })
  expect(log.lines.some((l) => l.msg === 'refused call: bad bearer token')).toBe(false)
})

test('tokens from a function and from a secret store, read on every call', async () => {
  let current = 'first'
  const { server } = await authServer(() => current)
  const store = { get: async (name: string) => (name === 'ducky_token' ? current : '') }
  const c = connect(Demo, server.address, { logger: recordingLogger(), token: { secrets: store, name: 'ducky_token' } })
  open.push(c)
  expect(await c.echo({ text: 'a' })).toEqual({ text: 'a' })
  current = 'rotated'
  expect(await c.echo({ text: 'b' })).toEqual({ text: 'b' })
  expect(
    (
      (await client(server.address, 'first')
        .echo({ text: 'c' })
        .catch((e: unknown) => e)) as RpcError
    ).code,
  ).toBe('UNAUTHENTICATED')
})

const dir = mkdtempSync(join(tmpdir(), 'ducky-tls-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

test("rigging's SecretStore supplies the token on both ends", async () => {
  const file = join(dir, 'ducky_token')
  writeFileSync(file, 'from-a-secret-file\n')
  const store = new SecretStore({ specs: { ducky_token: `file:${file}` }, sources: [] })
  const { server } = await authServer({ secrets: store, name: 'ducky_token' })
  const c = connect(Demo, server.address, { logger: recordingLogger(), token: { secrets: store, name: 'ducky_token' } })
  open.push(c)
  expect(await c.echo({ text: 'secret' })).toEqual({ text: 'secret' })
  expect(
    (
      (await client(server.address, 'other')
        .echo({ text: 'x' })
        .catch((e: unknown) => e)) as RpcError
    ).code,
  ).toBe('UNAUTHENTICATED')
})

function selfSignedCert(): { certFile: string; keyFile: string } {
  const certFile = join(dir, 'cert.pem')
  const keyFile = join(dir, 'key.pem')
  // openssl is on this machine (checked with `which openssl`); node:crypto cannot issue certificates.
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  )
  return { certFile, keyFile }
}

test('TLS with a self-signed certificate, plus a token', async () => {
  const tls = selfSignedCert()
  const server = await serve(Demo, impl, { tls, token: TOKEN, logger: recordingLogger() })
  servers.push(server)
  const secure = client(`localhost:${server.port}`, TOKEN, { tls: { caFile: tls.certFile } })
  expect(await secure.echo({ text: 'over tls' })).toEqual({ text: 'over tls' })
  const plain = client(`localhost:${server.port}`, TOKEN, { retry: { maxAttempts: 1 }, deadlineMs: 3000 })
  const err = (await plain.echo({ text: 'x' }).catch((e: unknown) => e)) as RpcError
  expect(err.code).toMatch(/UNAVAILABLE|DEADLINE_EXCEEDED/)
})

test('an unreadable certificate file is named in the error', async () => {
  const err = (await serve(Demo, impl, {
    tls: { certFile: join(dir, 'missing.pem'), keyFile: join(dir, 'missing.key') },
    logger: recordingLogger(),
  }).catch((e: unknown) => e)) as RpcError
  expect(err.code).toBe('INVALID_ARGUMENT')
  expect(err.message).toMatch(/tls\.certFile: cannot read .*missing\.pem \(ENOENT\)/)
})

test(
  'an authorize hook decides from the metadata before the handler ' +
    'runs: its RpcError is the answer, it may be async, and Health skips it',
  async () => {
    let handled = 0
    const log = recordingLogger()
    const server = await serve(
      Demo,
      { ...impl, echo: ({ text }: { text: string }) => (handled++, { text }) },
      {
        logger: log,
        authorize: async (md, method) => {
          const header = md.get('authorization')[0]
          if (header === 'Bearer job-token' && method.endsWith('/echo')) return
          throw new RpcError(
            header === undefined ? 'UNAUTHENTICATED' : 'PERMISSION_DENIED',
            `not allowed to call ${method}`,
          )
        },
      },
    )
    servers.push(server)
    expect(await client(server.address, 'job-token').echo({ text: 'ok' })).toEqual({ text: 'ok' })
    const none = (await client(server.address)
      .echo({ text: 'x' })
      .catch((e: unknown) => e)) as RpcError
    expect({ code: none.code, details: none.details }).toEqual({
      code: 'UNAUTHENTICATED',
      details: 'not allowed to call /ducky.test.Demo/echo',
    })
    const other = (await client(server.address, 'job-token')
      .slow({ ms: 1 })
      .catch((e: unknown) => e)) as RpcError
    expect(other.code).toBe('PERMISSION_DENIED')
    expect(handled).toBe(1)
    expect(log.lines.filter((l) => l.msg === 'refused call').map((l) => l.obj.code)).toEqual([
      'UNAUTHENTICATED',
      'PERMISSION_DENIED',
    ])
    expect(await checkHealth(server.address)).toBe('SERVING')
  },
)
