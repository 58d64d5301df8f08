/**
 * @module The links between the members of one mesh: a full mesh of TCP connections
 * (each member listens; each connects to every member of lower rank), carrying raw
 * binary frames. Frames are matched to receivers by (communicator, sequence, kind,
 * chunk, sender), so collectives on different sub-groups can run at the same time.
 */
import { randomUUID } from 'node:crypto'
import { readFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { FrayError } from '../errors.js'
import { FrameReader, writeFrame, type FrameHeader } from '../internal/framing.js'

/**
 * A member's listening address: TCP always, and a Unix socket that members on the same machine
 * use instead (it costs about half the CPU of loopback TCP per byte).
 */
export type PeerAddress = { host: string; port: number; path?: string; machine?: string }

const socketPaths = new Set<string>()
/** Socket files go with the process even when nobody closes the mesh (a SIGKILL still leaves them). */
function removeAtExit(path: string): void {
  if (socketPaths.size === 0) process.once('exit', removeSocketFiles)
  socketPaths.add(path)
}

/** Removes this process's mesh socket files; for signal handlers, which skip 'exit' hooks. */
export function removeSocketFiles(): void {
  for (const p of socketPaths) rmSync(p, { force: true })
  socketPaths.clear()
}

/** On SIGTERM, removes the socket files and dies of the same signal (so the exit still reads as SIGTERM). */
export function cleanUpOnSigterm(): void {
  process.once('SIGTERM', () => {
    removeSocketFiles()
    process.kill(process.pid, 'SIGTERM')
  })
}

let machineId: string | undefined
/** Identifies this machine (and boot), so that a Unix socket path is only used where it exists. */
function thisMachine(): string {
  if (machineId === undefined) {
    let boot = ''
    try {
      boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
    } catch {
      /* not Linux: the host name alone */
    }
    machineId = `${hostname()}/${boot}`
  }
  return machineId
}

const HELLO = 0xffff

type Waiter = { resolve: (b: Uint8Array) => void; reject: (e: Error) => void; total: number; into?: Uint8Array | undefined }

export class Peers {
  private readonly sockets = new Map<number, net.Socket>()
  private readonly inbox = new Map<string, { h: FrameHeader; b: Uint8Array }>()
  private readonly waiters = new Map<string, Waiter>()
  private failure: FrayError | null = null
  private rank = -1
  private expected = 0
  private onAllConnected: (() => void) | null = null

  private constructor(
    private readonly server: net.Server,
    private readonly local: net.Server | null,
    private readonly path: string | null,
  ) {}

  /** Opens this member's listening sockets (TCP on `host`, and a Unix socket where there are some). */
  static async listen(host = '127.0.0.1'): Promise<Peers> {
    const listen = (srv: net.Server, ...args: unknown[]) =>
      new Promise<void>((res, rej) => {
        srv.once('error', rej)
        ;(srv.listen as (...a: unknown[]) => void)(...args, () => res())
      })
    const server = net.createServer()
    await listen(server, 0, host)
    let local: net.Server | null = null
    let path: string | null = null
    if (process.platform !== 'win32') {
      const p = join(tmpdir(), `fray-${randomUUID().slice(0, 12)}.sock`)
      const srv = net.createServer()
      try {
        await listen(srv, p)
        local = srv
        path = p
        removeAtExit(p)
      } catch {
        srv.close() // no Unix sockets here: TCP only
      }
    }
    const peers = new Peers(server, local, path)
    server.on('connection', (s) => peers.accept(s))
    local?.on('connection', (s) => peers.accept(s))
    return peers
  }

  address(): PeerAddress {
    const a = this.server.address() as net.AddressInfo
    return { host: a.address, port: a.port, ...(this.path ? { path: this.path, machine: thisMachine() } : {}) }
  }

  /** Connects to every lower rank and waits for every higher rank to connect. */
  async connect(rank: number, addresses: readonly PeerAddress[]): Promise<void> {
    this.rank = rank
    this.expected = addresses.length - 1
    const all = new Promise<void>((res) => {
      this.onAllConnected = res
    })
    await Promise.all(
      addresses.slice(0, rank).map(
        (a, peer) =>
          new Promise<void>((res, rej) => {
            const s = a.path && a.machine === thisMachine() ? net.connect(a.path) : net.connect(a.port, a.host)
            s.once('error', rej)
            s.once('connect', () => {
              s.off('error', rej)
              this.attach(s, peer)
              writeFrame(s, { comm: 0, seq: 0, kind: HELLO, chunk: 0, from: rank, total: 0 }).catch(() => {}) // a lost peer shows up on 'close'
              res()
            })
          }),
      ),
    )
    this.checkConnected()
    await all
  }

  private accept(s: net.Socket): void {
    // The first frame on an accepted socket names the connecting rank.
    let known = false
    const reader = new FrameReader(
      (h, b) => {
        if (!known && h.kind === HELLO) {
          known = true
          this.attach(s, h.from, reader)
          this.checkConnected()
          return
        }
        this.deliver(h, b)
      },
      (h, len) => this.destination(h, len),
    )
    s.on('data', (d: Buffer) => reader.push(d))
    s.on('error', () => {})
  }

  private attach(s: net.Socket, peer: number, reader?: FrameReader): void {
    s.setNoDelay(true)
    this.sockets.set(peer, s)
    if (!reader) {
      const r = new FrameReader(
        (h, b) => this.deliver(h, b),
        (h, len) => this.destination(h, len),
      )
      s.on('data', (d: Buffer) => r.push(d))
    }
    s.on('error', () => {})
    s.on('close', () => {
      if (this.sockets.get(peer) === s) this.fail(new FrayError('COLLECTIVE_PEER_LOST', `mesh member ${peer} disconnected from member ${this.rank}; recreate the mesh after restarting the member`))
    })
  }

  private checkConnected(): void {
    if (this.sockets.size === this.expected && this.onAllConnected) {
      this.onAllConnected()
      this.onAllConnected = null
    }
  }

  private key(comm: number, seq: number, kind: number, chunk: number, from: number): string {
    return `${comm}.${seq}.${kind}.${chunk}.${from}`
  }

  private destination(h: FrameHeader, len: number): Uint8Array | undefined {
    const w = this.waiters.get(this.key(h.comm, h.seq, h.kind, h.chunk, h.from))
    return w && w.total === h.total && w.into?.byteLength === len ? w.into : undefined
  }

  private deliver(h: FrameHeader, b: Uint8Array): void {
    const k = this.key(h.comm, h.seq, h.kind, h.chunk, h.from)
    const w = this.waiters.get(k)
    if (!w) {
      this.inbox.set(k, { h, b })
      return
    }
    this.waiters.delete(k)
    if (w.total !== h.total) w.reject(mismatch(h, w.total, this.rank))
    else w.resolve(b)
  }

  /** Sends one frame to `peer`; resolves when the payload buffer may be reused. */
  send(peer: number, h: Omit<FrameHeader, 'from'>, payload?: ArrayBufferView): Promise<void> {
    if (this.failure) return Promise.reject(this.failure)
    const s = this.sockets.get(peer)
    if (!s) return Promise.reject(new FrayError('NOT_IN_MESH', `member ${this.rank} has no link to member ${peer}; is it in this mesh?`))
    const sent = writeFrame(s, { ...h, from: this.rank }, payload)
    // A write to a peer that died fails too; the collective learns of the loss through
    // `fail`, and a caller that already gave up must not leave an unhandled rejection
    // that would take this member's process down with its peer.
    sent.catch(() => {})
    return sent
  }

  /**
   * The payload of the frame `peer` sent with these fields. With `into`, a payload of that
   * length that has not arrived yet is written straight into it (and `into` is returned).
   */
  recv(peer: number, comm: number, seq: number, kind: number, chunk: number, total: number, into?: Uint8Array): Promise<Uint8Array> {
    const k = this.key(comm, seq, kind, chunk, peer)
    const got = this.inbox.get(k)
    if (got) {
      this.inbox.delete(k)
      return got.h.total === total ? Promise.resolve(got.b) : Promise.reject(mismatch(got.h, total, this.rank))
    }
    if (this.failure) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => this.waiters.set(k, { resolve, reject, total, into }))
  }

  private fail(err: FrayError): void {
    if (this.failure) return
    this.failure = err
    for (const w of this.waiters.values()) w.reject(err)
    this.waiters.clear()
  }

  close(): void {
    this.failure ??= new FrayError('NOT_IN_MESH', `member ${this.rank} left the mesh`)
    for (const s of this.sockets.values()) s.destroy()
    this.sockets.clear()
    this.server.close()
    this.local?.close()
    if (this.path) {
      rmSync(this.path, { force: true })
      socketPaths.delete(this.path)
    }
    for (const w of this.waiters.values()) w.reject(this.failure)
    this.waiters.clear()
  }
}

function mismatch(h: FrameHeader, total: number, rank: number): FrayError {
  return new FrayError(
    'COLLECTIVE_MISMATCH',
    `member ${rank}: collective #${h.seq} got ${h.total} bytes from member ${h.from} but expected ${total}; ` +
      'every member must call the same collectives in the same order with buffers of the same length',
  )
}
