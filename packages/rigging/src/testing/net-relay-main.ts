/**
 * @module The relay of a delayed link as a process (`delayLink` starts one in each host): argv[2] is JSON
 * `{ host, ports, targetHost, delayMs }`; every connection to `host:port` goes to `targetHost:port`, `delayMs` later
 * each way. Prints `{"relaying":{"host","ports":N,"delayMs"}}` once it listens, then `{"accepted":PORT}` for every
 * connection, until killed.
 */
import { startRelay } from './net-relay.js'

const arg = process.argv[2]
if (!arg) throw new Error('net-relay-main: usage: net-relay-main.ts \'{"host","ports","targetHost","delayMs"}\'')
const { host, ports, targetHost, delayMs } = JSON.parse(arg) as {
  host: string
  ports: number[]
  targetHost: string
  delayMs: number
}
const relay = await startRelay({
  host,
  ports,
  target: (port) => ({ host: targetHost, port }),
  delayMs,
  onAccept: (port) => process.stdout.write(`${JSON.stringify({ accepted: port })}\n`),
})
process.stdout.write(`${JSON.stringify({ relaying: { host, ports: relay.ports.length, delayMs } })}\n`)
const stop = () => void relay.close().then(() => process.exit(0))
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
