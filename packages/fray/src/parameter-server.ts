/**
 * @module `ParameterServer`: parameters sharded over an actor group; replicas push gradients and
 * pull parameters. The other data-parallel strategy besides all-reduce on a `Mesh`: replicas do
 * not wait for each other, at the price of stale parameters.
 *
 * @example
 * const ps = await ParameterServer.create(client, { init: params, shards: 2, lr: 0.1 })
 * // pass ps.address() (plain data) to replica actors; inside them:
 * const conn = await ParameterServerClient.connect(address)
 * await conn.push(grad); const fresh = await conn.pull()
 */
import net from 'node:net'
import { actorClass, type ActorHandle } from './actor.js'
import type { ActorGroup } from './actor-group.js'
import type { Client } from './client.js'
import { FrayError } from './errors.js'
import { FrameReader, writeFrame } from './internal/framing.js'
import { PS_KIND, type ParameterShard } from './parameter-shard.js'

const here = import.meta.url
const SHARD_CLASS = actorClass<typeof ParameterShard>(
  new URL(here.endsWith('.ts') ? './parameter-shard.ts' : './parameter-shard.js', here),
  'ParameterShard',
)

/** Where the shards are and which slice each holds: plain data, to hand to replicas. */
export type ParameterServerAddress = {
  readonly length: number
  readonly shards: ReadonlyArray<{ host: string; port: number; lo: number; hi: number }>
}

export type ParameterServerOptions = {
  /** Initial parameters. */
  init: Float32Array
  /** Shards (actors). @default 1 */
  shards?: number
  /** Learning rate of the update `params -= lr * grad`. @default 1 */
  lr?: number
}

function bounds(length: number, shards: number, i: number): [number, number] {
  return [Math.floor((i * length) / shards), Math.floor(((i + 1) * length) / shards)]
}

export class ParameterServer {
  private constructor(
    readonly group: ActorGroup<ParameterShard>,
    private readonly addr: ParameterServerAddress,
  ) {}

  /** Starts the shard actors, each with its slice of `init`. */
  static async create(client: Client, opts: ParameterServerOptions): Promise<ParameterServer> {
    const shards = opts.shards ?? 1
    if (!Number.isInteger(shards) || shards < 1 || shards > opts.init.length) {
      throw new FrayError(
        'PARAMETER_SERVER',
        `ParameterServer: shards=${shards} must be an integer in [1, ${opts.init.length}] (the parameter count)`,
      )
    }
    const lr = opts.lr ?? 1
    const group = await client.createActorGroup(
      SHARD_CLASS,
      shards,
      (i) => {
        const [lo, hi] = bounds(opts.init.length, shards, i)
        return [opts.init.slice(lo, hi), lr] as [Float32Array, number]
      },
      { name: 'parameter-shard' },
    )
    await group.waitReady()
    const addrs = await group.broadcast.address()
    return new ParameterServer(group, {
      length: opts.init.length,
      shards: addrs.map((a, i) => {
        const [lo, hi] = bounds(opts.init.length, shards, i)
        return { ...a, lo, hi }
      }),
    })
  }

  /** Plain data for replicas: `ParameterServerClient.connect(ps.address())`. */
  address(): ParameterServerAddress {
    return this.addr
  }

  /** Pushes a full gradient from the driver. */
  async push(grad: Float32Array): Promise<void> {
    checkLength(grad, this.addr.length)
    await Promise.all(
      this.group.members.map((m: ActorHandle<ParameterShard>, i) =>
        m.push(grad.slice(this.addr.shards[i]!.lo, this.addr.shards[i]!.hi)),
      ),
    )
  }

  /** Pulls the full parameters to the driver. */
  async pull(): Promise<Float32Array> {
    const parts = await this.group.broadcast.pull()
    const out = new Float32Array(this.addr.length)
    parts.forEach((p, i) => out.set(p, this.addr.shards[i]!.lo))
    return out
  }

  async shutdown(): Promise<void> {
    await this.group.shutdown()
  }
}

function checkLength(x: Float32Array, length: number): void {
  if (x.length !== length)
    throw new FrayError(
      'PARAMETER_SERVER',
      `parameter server holds ${length} parameters but got a gradient ` +
        `of ${x.length}; push the full flattened gradient`,
    )
}

/** A replica's connection to every shard. */
export class ParameterServerClient {
  private next = 1
  private readonly waiting = new Map<number, (b: Uint8Array | null) => void>()

  private constructor(
    private readonly addr: ParameterServerAddress,
    private readonly sockets: net.Socket[],
  ) {}

  static async connect(addr: ParameterServerAddress): Promise<ParameterServerClient> {
    const sockets = await Promise.all(
      addr.shards.map(
        (s) =>
          new Promise<net.Socket>((res, rej) => {
            const sock = net.connect(s.port, s.host)
            sock.once('error', (err) =>
              rej(
                new FrayError(
                  'PARAMETER_SERVER',
                  `cannot reach parameter shard at ${s.host}:${s.port}: ` +
                    `${err.message}; is the server still running?`,
                ),
              ),
            )
            sock.once('connect', () => res(sock))
          }),
      ),
    )
    const c = new ParameterServerClient(addr, sockets)
    for (const s of sockets) {
      s.setNoDelay(true)
      const reader = new FrameReader((h, b) => {
        const w = c.waiting.get(h.from)
        c.waiting.delete(h.from)
        w?.(b)
      })
      s.on('data', (d: Buffer) => reader.push(d))
      s.on('close', () => {
        for (const w of c.waiting.values()) w(null)
        c.waiting.clear()
      })
    }
    return c
  }

  private request(shard: number, kind: number, payload?: Float32Array): Promise<Uint8Array> {
    const id = this.next++
    const s = this.addr.shards[shard]!
    const p = new Promise<Uint8Array>((res, rej) =>
      this.waiting.set(id, (b) =>
        b
          ? res(b)
          : rej(
              new FrayError(
                'PARAMETER_SERVER',
                `parameter shard ${shard} at ${s.host}:${s.port} closed the ` +
                  `connection; is the server still running?`,
              ),
            ),
      ),
    )
    // A failed write means the shard is gone: the waiter above rejects when its socket closes.
    writeFrame(
      this.sockets[shard]!,
      { comm: 0, seq: 0, kind, chunk: 0, from: id, total: payload?.byteLength ?? 0 },
      payload,
    ).catch(() => {})
    return p
  }

  /** Sends a full gradient; each shard applies its slice. */
  async push(grad: Float32Array): Promise<void> {
    checkLength(grad, this.addr.length)
    await Promise.all(this.addr.shards.map((s, i) => this.request(i, PS_KIND.push, grad.subarray(s.lo, s.hi))))
  }

  /** The current parameters, assembled from every shard. */
  async pull(): Promise<Float32Array> {
    const out = new Float32Array(this.addr.length)
    await Promise.all(
      this.addr.shards.map(async (s, i) => {
        const b = await this.request(i, PS_KIND.pull)
        out.set(new Float32Array(b.buffer, b.byteOffset, s.hi - s.lo), s.lo)
      }),
    )
    return out
  }

  close(): void {
    for (const s of this.sockets) s.destroy()
  }
}
