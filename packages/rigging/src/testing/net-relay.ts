/**
 * @module A TCP relay that adds a fixed one-way delay, for tests and benches of a slow link where the kernel has no
 * `netem` qdisc: every connection accepted on one of `ports` of `host` is joined to `target(port)`, and every chunk
 * read from either side is written to the other `delayMs` after it arrived, in order (a fixed-delay link of
 * unbounded bandwidth, as netem's `delay`; the relay holds what is in flight, up to `maxBufferedBytes` a direction,
 * then stops reading). Half-closes pass through; an error on either side resets both.
 *
 * @example
 * const relay = await startRelay({ host: '127.0.0.1', ports: [7001], target: (p) => ({ host: '10.0.0.2', port: p }),
 *   delayMs: 10 })
 * // a connection to 127.0.0.1:7001 reaches 10.0.0.2:7001, 10 ms later each way
 * await relay.close()
 */
import net from 'node:net'

export type RelayOptions = {
  /** The address the relay listens on. */
  readonly host: string
  /** The ports it listens on (0: one the system picks; see `Relay.ports`). */
  readonly ports: readonly number[]
  /** Where a connection accepted on `port` is relayed to. */
  readonly target: (port: number) => { host: string; port: number }
  /** The delay added to every byte, each way, in milliseconds (0: none beyond the relay's own). */
  readonly delayMs: number
  /** Bytes held in flight per direction before the relay stops reading that side. @default 64 MiB */
  readonly maxBufferedBytes?: number
  /** Called with the port of every connection accepted. */
  readonly onAccept?: (port: number) => void
}

export type Relay = {
  /** The ports listened on, in the order given. */
  readonly ports: readonly number[]
  /** Connections accepted so far. */
  readonly accepted: () => number
  /** Stops listening and resets every connection. */
  close(): Promise<void>
}

/** Copies `from` to `to`, each chunk `delayMs` after it was read, with `from` paused while too much is held. */
function pipeDelayed(from: net.Socket, to: net.Socket, delayMs: number, maxBuffered: number): void {
  const queue: { due: number; chunk: Buffer }[] = []
  let held = 0
  let ended = false
  let scheduled = false
  const over = () => held + to.writableLength > maxBuffered
  const flush = () => {
    scheduled = false
    const now = performance.now()
    while (queue.length && queue[0]!.due <= now) {
      const { chunk } = queue.shift()!
      held -= chunk.length
      if (!to.destroyed) to.write(chunk)
    }
    if (queue.length) {
      scheduled = true
      setTimeout(flush, Math.max(0, queue[0]!.due - performance.now()))
    } else if (ended && !to.destroyed) to.end()
    if (!over() && from.isPaused()) from.resume()
  }
  from.on('data', (chunk: Buffer) => {
    if (delayMs <= 0 && queue.length === 0) to.write(chunk)
    else {
      queue.push({ due: performance.now() + delayMs, chunk })
      held += chunk.length
      if (!scheduled) {
        scheduled = true
        setTimeout(flush, delayMs)
      }
    }
    if (over()) from.pause()
  })
  to.on('drain', () => {
    if (!over() && from.isPaused()) from.resume()
  })
  from.on('end', () => {
    ended = true
    if (queue.length === 0 && !to.destroyed) to.end()
  })
}

/** Starts a relay (see the module doc); resolves once it listens on every port. */
export async function startRelay(opts: RelayOptions): Promise<Relay> {
  if (!(Number.isFinite(opts.delayMs) && opts.delayMs >= 0))
    throw new Error(`net-relay: delayMs must be a number of milliseconds ≥ 0, not ${opts.delayMs}`)
  if (opts.ports.length === 0) throw new Error('net-relay: give at least one port to listen on')
  const maxBuffered = opts.maxBufferedBytes ?? 64 * 2 ** 20
  const sockets = new Set<net.Socket>()
  let accepted = 0
  const servers: net.Server[] = []
  const onConnection = (port: number) => (client: net.Socket) => {
    accepted++
    opts.onAccept?.(port)
    const t = opts.target(port)
    const upstream = net.connect({ host: t.host, port: t.port, allowHalfOpen: true })
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.setNoDelay(true)
      s.on('close', () => sockets.delete(s))
    }
    // Either side failing resets the other, as a broken link would.
    client.on('error', () => upstream.resetAndDestroy())
    upstream.on('error', () => client.resetAndDestroy())
    client.on('close', (hadError) => hadError && upstream.destroy())
    upstream.on('close', (hadError) => hadError && client.destroy())
    pipeDelayed(client, upstream, opts.delayMs, maxBuffered)
    pipeDelayed(upstream, client, opts.delayMs, maxBuffered)
  }
  const close = async () => {
    for (const s of sockets) s.destroy()
    await Promise.all(servers.map((srv) => new Promise<void>((r) => srv.close(() => r()))))
  }
  try {
    for (const port of opts.ports) {
      // Half-open: one side's end is passed on after the delay, not answered at once by ending the other way.
      const srv = net.createServer({ allowHalfOpen: true })
      servers.push(srv)
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject)
        srv.listen(port, opts.host, () => resolve())
      })
    }
  } catch (err) {
    await close()
    throw new Error(`net-relay: cannot listen on ${opts.host}: ${(err as Error).message}`, { cause: err })
  }
  const ports = servers.map((srv, i) => {
    const port = (srv.address() as net.AddressInfo).port
    srv.on('connection', onConnection(opts.ports[i] === 0 ? port : opts.ports[i]!))
    return port
  })
  return { ports, accepted: () => accepted, close }
}
