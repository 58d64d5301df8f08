/** The address `iris worker` registers by: `--advertise` checked against this host's own addresses, else the local
 * address of its connection to the controller. On loopback only (hosts.test.ts runs it across hosts). */
import { createServer, type Server } from 'node:net'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { checkAdvertise, localAddressToward, splitHostPort } from './cli-advertise.js'

let server: Server
let controller: string
beforeAll(async () => {
  server = createServer((s) => s.destroy())
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  controller = `127.0.0.1:${(server.address() as { port: number }).port}`
})
afterAll(() => new Promise<void>((r) => server.close(() => r())))

test('HOST[:PORT] splits, IPv6 in brackets', () => {
  expect(splitHostPort('10.0.0.2:8000')).toEqual({ host: '10.0.0.2', port: 8000 })
  expect(splitHostPort('10.0.0.2')).toEqual({ host: '10.0.0.2' })
  expect(splitHostPort('[fe80::1]:9')).toEqual({ host: 'fe80::1', port: 9 })
  expect(splitHostPort('[::1]')).toEqual({ host: '::1' })
})

test('the default is the local address of a connection to the controller; an unreachable one is named', async () => {
  expect(await localAddressToward(controller)).toBe('127.0.0.1')
  expect(await localAddressToward(`grpc://${controller}`)).toBe('127.0.0.1')
  const closed = createServer()
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r))
  const port = (closed.address() as { port: number }).port
  await new Promise<void>((r) => closed.close(() => r()))
  await expect(localAddressToward(`127.0.0.1:${port}`)).rejects.toThrow(`controller 127.0.0.1:${port}`)
  await expect(localAddressToward('nohostport')).rejects.toThrow('--controller nohostport is not HOST:PORT')
})

test('--advertise is an address of this host the controller reaches; errors name it and the flag', async () => {
  expect(await checkAdvertise('127.0.0.1:8080', controller)).toBe('127.0.0.1:8080')
  expect(await checkAdvertise('localhost', controller)).toMatch(/^(127\.0\.0\.1|\[::1\])$/)
  await expect(checkAdvertise('192.0.2.77', controller)).rejects.toThrow(
    /--advertise 192\.0\.2\.77 is not an address of this host; its addresses are .*127\.0\.0\.1/,
  )
  await expect(checkAdvertise('0.0.0.0', controller)).rejects.toThrow('--advertise 0.0.0.0 is the unspecified address')
  await expect(checkAdvertise('127.0.0.1', '192.0.2.1:10000')).rejects.toThrow(
    '--advertise 127.0.0.1 is a loopback address, which the controller at 192.0.2.1:10000',
  )
  await expect(checkAdvertise('127.0.0.1:99999', controller)).rejects.toThrow('is not HOST[:PORT]')
  await expect(checkAdvertise('no-such-host.invalid', controller)).rejects.toThrow(
    '--advertise no-such-host.invalid: no-such-host.invalid does not resolve',
  )
})
