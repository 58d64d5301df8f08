/**
 * @module The driver's side of hosted actors: a small ducky server where each host process,
 * once started (by iris or locally), registers its address and collects its actor's spec.
 */
import { RpcError, serve, type DuckyServer } from '@marin/ducky'
import type { ActorSpec } from '../actor-runtime.js'
import type { ErrorPayload } from '../internal/wire.js'
import { DriverService } from './services.js'

export type Registration = { address: string; pid: number }

type Expected = {
  spec: ActorSpec
  onRegister: (r: Registration) => void
  onReady: (error: ErrorPayload | undefined) => void
}

export class DriverRegistry {
  private readonly expected = new Map<string, Expected>()

  private constructor(private readonly server: DuckyServer) {}

  get address(): string {
    return this.server.address
  }

  static async start(host = '127.0.0.1'): Promise<DriverRegistry> {
    let self: DriverRegistry | null = null
    const server = await serve(
      DriverService,
      {
        register: ({ name, address, pid }) => {
          const e = self!.expected.get(name)
          if (!e) throw new RpcError('NOT_FOUND', `no actor named ${name} is expected by this driver; was it stopped?`)
          e.onRegister({ address, pid })
          return { spec: { ...e.spec, args: [...e.spec.args] } }
        },
        built: ({ name, error }) => {
          const e = self!.expected.get(name)
          if (!e) throw new RpcError('NOT_FOUND', `no actor named ${name} is expected by this driver`)
          e.onReady(error)
          return {}
        },
      },
      { host, port: 0 },
    )
    self = new DriverRegistry(server)
    return self
  }

  /** Waits for the host of `spec.name` to register, then to build the actor. */
  expect(spec: ActorSpec): { registered: Promise<Registration>; ready: Promise<ErrorPayload | undefined> } {
    let onRegister!: (r: Registration) => void
    let onReady!: (e: ErrorPayload | undefined) => void
    const registered = new Promise<Registration>((r) => (onRegister = r))
    const ready = new Promise<ErrorPayload | undefined>((r) => (onReady = r))
    this.expected.set(spec.name, { spec, onRegister, onReady })
    return { registered, ready }
  }

  forget(name: string): void {
    this.expected.delete(name)
  }

  async close(): Promise<void> {
    await this.server.shutdown({ graceMs: 500 })
  }
}
