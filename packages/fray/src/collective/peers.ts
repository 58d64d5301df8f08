/**
 * @module The links between the members of one mesh: a full mesh of TCP connections
 * (each member listens; each connects to every member of lower rank), carrying raw
 * binary frames. Frames are matched to receivers by (communicator, sequence, kind,
 * chunk, sender), so collectives on different sub-groups can run at the same time.
 */
import net from 'node:net'
import { FrayError } from '../errors.js'
import { FrameReader, writeFrame, type FrameHeader } from '../internal/framing.js'

/** A member's listening address. */
export type PeerAddress = { host: string; port: number }

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

  private constructor(private readonly server: net.Server) {}

  /** Opens this member's listening socket. */
  static async listen(host = '127.0.0.1'): Promise<Peers> {
    const server = net.createServer()
    const peers = new Peers(server)
    server.on('connection', (s) => peers.accept(s))
    await new Promise<void>((res, rej) => {
      server.once('error', rej)
      server.listen(0, host, () => res())
    })
    return peers
  }

  address(): PeerAddress {
    const a = this.server.address() as net.AddressInfo
    return { host: a.address, port: a.port }
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
            const s = net.connect(a.port, a.host)
            s.once('error', rej)
            s.once('connect', () => {
              s.off('error', rej)
              this.attach(s, peer)
              void writeFrame(s, { comm: 0, seq: 0, kind: HELLO, chunk: 0, from: rank, total: 0 })
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
    return writeFrame(s, { ...h, from: this.rank }, payload)
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
