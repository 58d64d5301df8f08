/**
 * @module One shard of a parameter server, as an actor: a slice of the parameters, updated by
 * pushed gradients (`params -= lr * grad`, applied in arrival order: asynchronous SGD) and
 * read by pulls. Replicas reach it over its own TCP socket with raw float frames, so they can
 * push and pull from inside their own actors without going through the driver.
 */
import net from 'node:net'
import { FrameReader, writeFrame } from './internal/framing.js'

export const PS_KIND = { push: 1, pull: 2, pushAck: 3, pullReply: 4 } as const

export class ParameterShard {
  private readonly params: Float32Array
  private version = 0
  private server: net.Server | null = null
  private readonly sockets = new Set<net.Socket>()

  constructor(
    init: Float32Array,
    private readonly lr: number,
  ) {
    this.params = Float32Array.from(init)
  }

  /** Opens the shard's socket (once) and returns where replicas connect. */
  async address(host = process.env.FRAY_LISTEN_HOST ?? '127.0.0.1'): Promise<{ host: string; port: number }> {
    if (!this.server) {
      const server = net.createServer((s) => this.serve(s))
      await new Promise<void>((res, rej) => {
        server.once('error', rej)
        server.listen(0, host, () => res())
      })
      this.server = server
    }
    const a = this.server.address() as net.AddressInfo
    return { host: process.env.FRAY_ADVERTISE_HOST ?? a.address, port: a.port }
  }

  private serve(s: net.Socket): void {
    s.setNoDelay(true)
    this.sockets.add(s)
    s.on('close', () => this.sockets.delete(s))
    s.on('error', () => {})
    const reader = new FrameReader((h, b) => {
      if (h.kind === PS_KIND.push) {
        this.push(new Float32Array(b.buffer, b.byteOffset, b.byteLength >> 2))
        writeFrame(s, { comm: 0, seq: this.version, kind: PS_KIND.pushAck, chunk: 0, from: h.from, total: 0 }).catch(
          () => {},
        ) // a gone client needs no ack
      } else if (h.kind === PS_KIND.pull) {
        // Copy: the socket sends asynchronously and a push could land before it flushes.
        const snapshot = this.params.slice()
        writeFrame(
          s,
          { comm: 0, seq: this.version, kind: PS_KIND.pullReply, chunk: 0, from: h.from, total: snapshot.byteLength },
          snapshot,
        ).catch(() => {}) // a gone client needs no reply
      }
    })
    s.on('data', (d: Buffer) => reader.push(d))
  }

  /** Applies one gradient: `params -= lr * grad`. Returns the new version. */
  push(grad: Float32Array): number {
    const p = this.params
    const n = Math.min(p.length, grad.length)
    for (let i = 0; i < n; i++) p[i]! -= this.lr * grad[i]!
    return ++this.version
  }

  /** The shard's current parameters. */
  pull(): Float32Array {
    return this.params.slice()
  }

  /** Updates applied so far. */
  getVersion(): number {
    return this.version
  }

  close(): void {
    for (const s of this.sockets) s.destroy()
    this.server?.close()
  }
}
