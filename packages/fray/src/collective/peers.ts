/**
 * @module The links between the members of one mesh, carrying raw binary frames. Every member
 * listens and dials every other member; it reads on the connections it dialed and writes on the
 * ones it accepted. Dialed sockets let the reader choose where each read lands (`FrameSink`), so
 * a payload goes from the kernel straight into the receiver's array: no read allocates and no
 * payload is copied again. Frames are matched to receivers by (communicator, sequence, kind,
 * chunk, sender), so collectives on different sub-groups can run at the same time.
 *
 * Every collective starts with an announcement to each other member of its sub-group of what
 * this member called (`CollectiveCall`, checked by `Agreements`).
 */
import { randomUUID } from 'node:crypto'
import { rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { FrayError } from '../errors.js'
import { FrameReader, FrameSink, writeFrame, type FrameHeader } from '../internal/framing.js'
import { Agreements, type OpGroup, opKey } from './agreement.js'
import { type CollectiveCall, decodeCall, encodeCall } from './call.js'
import { forgetSocketFile, removeAtExit, thisMachine } from './socket-files.js'

/**
 * A member's listening address: TCP always, and a Unix socket that members on the same machine
 * use instead (it costs about half the CPU of loopback TCP per byte).
 */
export type PeerAddress = { host: string; port: number; path?: string; machine?: string }

const HELLO = 0xffff
/** Frame kind of a collective's announcement. */
const ANNOUNCE = 0xfffe
/** Frame kind of a liveness ping (with `FRAY_PEER_TIMEOUT_MS`): it carries nothing and is never delivered. */
const PING = 0xfffd

/** How long dialing a member may take before the mesh fails naming its address. */
const CONNECT_TIMEOUT_MS = 15_000

/**
 * `FRAY_PEER_TIMEOUT_MS`: a member that sends nothing (not even its pings, every quarter of it) for this long is
 * lost, and collectives in flight fail naming it, as when its host is partitioned away. Unset or 0: no limit (a
 * partitioned member's collectives then wait for the kernel to give up on the connection). Members whose event loop
 * may stay busy longer than this (a long synchronous step) must set it higher.
 */
export function peerTimeoutMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.FRAY_PEER_TIMEOUT_MS
  if (raw === undefined || raw === '') return 0
  const ms = Number(raw)
  if (!Number.isInteger(ms) || ms < 0)
    throw new FrayError(
      'INVALID_MESH',
      `FRAY_PEER_TIMEOUT_MS=${raw} is not a whole number of milliseconds; set it to e.g. 10000, or 0 for no limit`,
    )
  return ms
}

type Waiter = {
  resolve: (b: Uint8Array) => void
  reject: (e: Error) => void
  total: number
  into?: Uint8Array | undefined
}

export class Peers {
  /** Accepted connections, which this member writes to. */
  private readonly out = new Map<number, net.Socket>()
  /** Dialed connections, which this member reads from. */
  private readonly in = new Map<number, net.Socket>()
  private readonly inbox = new Map<string, { h: FrameHeader; b: Uint8Array }>()
  private readonly waiters = new Map<string, Waiter>()
  private readonly agreements = new Agreements(
    () => this.rank,
    (key, err) => this.breakOp(key, err),
  )
  private failure: FrayError | null = null
  private rank = -1
  private expected = 0
  private onAllAccepted: (() => void) | null = null
  /** When each dialed peer last sent anything, and where it is (for errors). */
  private readonly heard = new Map<number, number>()
  private readonly where = new Map<number, string>()
  private pulse: NodeJS.Timeout | null = null

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

  /** Dials every other member and waits for every other member to dial this one. */
  async connect(rank: number, addresses: readonly PeerAddress[]): Promise<void> {
    const timeout = peerTimeoutMs()
    this.rank = rank
    this.expected = addresses.length - 1
    const accepted = new Promise<void>((res) => {
      this.onAllAccepted = res
    })
    this.checkAccepted()
    await Promise.all(addresses.map((a, peer) => (peer === rank ? null : this.dial(peer, a))))
    await accepted
    if (timeout > 0 && !this.failure) this.startPulse(timeout)
  }

  /** Pings every peer each quarter of `timeout` and fails the mesh on a peer silent for longer than `timeout`. */
  private startPulse(timeout: number): void {
    const beat = Math.max(10, Math.floor(timeout / 4))
    const now = Date.now()
    for (const peer of this.in.keys()) this.heard.set(peer, now)
    this.pulse = setInterval(() => {
      for (const s of this.out.values())
        writeFrame(s, { comm: 0, seq: 0, kind: PING, chunk: 0, from: this.rank, total: 0 }).catch(() => {})
      const t = Date.now()
      for (const [peer, at] of this.heard) {
        if (t - at <= timeout) continue
        this.fail(
          new FrayError(
            'COLLECTIVE_PEER_LOST',
            `mesh member ${peer} (at ${this.where.get(peer)}) sent nothing to member ${this.rank} for ` +
              `${t - at} ms (FRAY_PEER_TIMEOUT_MS=${timeout}): its host is unreachable (partitioned) or stalled; ` +
              'create the mesh again once it is back',
          ),
        )
        return
      }
    }, beat)
    this.pulse.unref()
  }

  private dial(peer: number, a: PeerAddress): Promise<void> {
    const sink = new FrameSink({ onFrame: (h, b) => this.deliver(h, b), bodyFor: (h, len) => this.destination(h, len) })
    const { buffer, callback } = sink.onread()
    const onread = {
      buffer,
      callback: (n: number) => {
        if (this.pulse) this.heard.set(peer, Date.now())
        callback(n)
        return true
      },
    }
    const local = a.path !== undefined && a.machine === thisMachine()
    const where = local ? `${a.path}` : `${a.host}:${a.port}`
    this.where.set(peer, where)
    return new Promise<void>((res, rej) => {
      const s = local ? net.connect({ path: a.path!, onread }) : net.connect({ port: a.port, host: a.host, onread })
      const unreachable = (why: string) => {
        s.destroy()
        rej(
          new FrayError(
            'COLLECTIVE_PEER_LOST',
            `mesh member ${this.rank} cannot reach member ${peer} at ${where} (${why}): that is the address its ` +
              'host gave out (FRAY_ADVERTISE_HOST, else its FRAY_LISTEN_HOST); set FRAY_ADVERTISE_HOST on that ' +
              "member's host to an address of it that the other members' hosts can reach",
          ),
        )
      }
      const timer = setTimeout(() => unreachable(`no connection within ${CONNECT_TIMEOUT_MS} ms`), CONNECT_TIMEOUT_MS)
      const onError = (err: NodeJS.ErrnoException) => {
        clearTimeout(timer)
        unreachable(err.code ?? err.message)
      }
      s.once('error', onError)
      s.once('connect', () => {
        clearTimeout(timer)
        s.off('error', onError)
        s.setNoDelay(true)
        this.in.set(peer, s)
        this.watch(s, peer, this.in)
        // a lost peer shows up on 'close'
        writeFrame(s, { comm: 0, seq: 0, kind: HELLO, chunk: 0, from: this.rank, total: 0 }).catch(() => {})
        res()
      })
    })
  }

  private accept(s: net.Socket): void {
    // The one frame on an accepted socket names the dialing rank; after it, this side only writes.
    const reader = new FrameReader((h) => {
      if (h.kind !== HELLO || this.out.has(h.from)) return
      s.setNoDelay(true)
      this.out.set(h.from, s)
      this.watch(s, h.from, this.out)
      this.checkAccepted()
    })
    s.on('data', (d: Buffer) => reader.push(d))
    s.on('error', () => {})
  }

  private watch(s: net.Socket, peer: number, links: Map<number, net.Socket>): void {
    s.on('error', () => {})
    s.on('close', () => {
      if (links.get(peer) === s)
        this.fail(
          new FrayError(
            'COLLECTIVE_PEER_LOST',
            `mesh member ${peer} disconnected from member ${this.rank}; a ` +
              `member restarted by maxRestarts rejoins the mesh by itself ` +
              `(retry once it is ready), otherwise create the mesh again`,
          ),
        )
    })
  }

  private checkAccepted(): void {
    if (this.out.size === this.expected && this.onAllAccepted) {
      this.onAllAccepted()
      this.onAllAccepted = null
    }
  }

  private key(comm: number, seq: number, kind: number, chunk: number, from: number): string {
    return `${opKey(comm, seq)}|${kind}.${chunk}.${from}`
  }

  private destination(h: FrameHeader, len: number): Uint8Array | undefined {
    const w = this.waiters.get(this.key(h.comm, h.seq, h.kind, h.chunk, h.from))
    return w && w.total === h.total && w.into?.byteLength === len ? w.into : undefined
  }

  private deliver(h: FrameHeader, b: Uint8Array): void {
    if (h.kind === PING) return
    if (h.kind === ANNOUNCE) return this.agreements.heard(h.comm, h.seq, h.from, decodeCall(h.chunk, h.total))
    const k = this.key(h.comm, h.seq, h.kind, h.chunk, h.from)
    const w = this.waiters.get(k)
    if (!w) {
      if (!this.agreements.isBroken(h.comm, h.seq)) this.inbox.set(k, { h, b })
      return
    }
    this.waiters.delete(k)
    if (w.total !== h.total) w.reject(mismatch(h, w.total, this.rank))
    else w.resolve(b)
  }

  /**
   * Starts a collective: tells every other member of `group` what this member called. Resolves
   * once all of them announced the same call, with their calls by rank; on a different call, rejects (and fails the
   * collective's pending receives) with `COLLECTIVE_MISMATCH` naming every call it knows of.
   */
  begin(group: OpGroup, seq: number, call: CollectiveCall): Promise<ReadonlyMap<number, CollectiveCall>> {
    if (this.failure) return Promise.reject(this.failure)
    const { chunk, total } = encodeCall(call)
    for (const r of group.ranks)
      if (r !== this.rank) void this.send(r, { comm: group.id, seq, kind: ANNOUNCE, chunk, total })
    return this.agreements.begin(group, seq, call)
  }

  /** A collective failed on a mismatch: its pending receives fail too, and frames already in go. */
  private breakOp(key: string, err: FrayError): void {
    const prefix = `${key}|`
    for (const [k, w] of this.waiters) {
      if (k.startsWith(prefix)) {
        this.waiters.delete(k)
        w.reject(err)
      }
    }
    for (const k of this.inbox.keys()) if (k.startsWith(prefix)) this.inbox.delete(k)
  }

  /** Sends one frame to `peer`; resolves when the payload buffer may be reused. */
  send(peer: number, h: Omit<FrameHeader, 'from'>, payload?: ArrayBufferView): Promise<void> {
    const s = this.out.get(peer)
    const sent = this.failure
      ? Promise.reject(this.failure)
      : s
        ? writeFrame(s, { ...h, from: this.rank }, payload)
        : Promise.reject(
            new FrayError('NOT_IN_MESH', `member ${this.rank} has no link to member ${peer}; is it in this mesh?`),
          )
    // A write to a peer that died fails too (as does one after the links failed); the collective
    // learns of the loss through `fail` or its receives, and a caller that already gave up must
    // not leave an unhandled rejection that would take this member's process down with its peer.
    sent.catch(() => {})
    return sent
  }

  /**
   * The payload of the frame `peer` sent with these fields. With `into`, a payload of that
   * length that has not arrived yet is written straight into it (and `into` is returned).
   */
  recv(
    peer: number,
    comm: number,
    seq: number,
    kind: number,
    chunk: number,
    total: number,
    into?: Uint8Array,
  ): Promise<Uint8Array> {
    const k = this.key(comm, seq, kind, chunk, peer)
    const got = this.inbox.get(k)
    if (got) {
      this.inbox.delete(k)
      return got.h.total === total ? Promise.resolve(got.b) : Promise.reject(mismatch(got.h, total, this.rank))
    }
    if (this.failure) return Promise.reject(this.failure)
    if (this.agreements.isBroken(comm, seq))
      return Promise.reject(new FrayError('COLLECTIVE_MISMATCH', `collective #${seq} already failed on a mismatch`))
    return new Promise((resolve, reject) => this.waiters.set(k, { resolve, reject, total, into }))
  }

  private fail(err: FrayError): void {
    if (this.pulse) clearInterval(this.pulse)
    this.pulse = null
    if (this.failure) return
    this.failure = err
    for (const w of this.waiters.values()) w.reject(err)
    this.waiters.clear()
    this.agreements.fail(err)
  }

  /** Closes every link; collectives in flight fail with `reason`. */
  close(reason?: FrayError): void {
    this.fail(reason ?? new FrayError('NOT_IN_MESH', `member ${this.rank} left the mesh`))
    for (const s of this.out.values()) s.destroy()
    for (const s of this.in.values()) s.destroy()
    this.out.clear()
    this.in.clear()
    this.server.close()
    this.local?.close()
    if (this.path) {
      rmSync(this.path, { force: true })
      forgetSocketFile(this.path)
    }
  }
}

function mismatch(h: FrameHeader, total: number, rank: number): FrayError {
  return new FrayError(
    'COLLECTIVE_MISMATCH',
    `member ${rank}: collective #${h.seq} got ${h.total} bytes from member ${h.from} but expected ${total}; ` +
      'every member must call the same collectives in the same order with buffers of the same length',
  )
}
