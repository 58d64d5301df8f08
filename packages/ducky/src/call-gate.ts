/**
 * @module The gate every call passes on the server before its first message is read: the bearer
 * token (and the server's own `authorize` check) is checked from the call's metadata, and the
 * method's size limits are set on the call's reader, so a refused call costs the server its
 * headers and nothing more.
 *
 * grpc-js reads a request only once the handler asks for it, and the handler runs only once the
 * gate passes the metadata on: a call without the right token is answered UNAUTHENTICATED while
 * its body is still unread (what arrives after the answer is dropped as it comes, never
 * gathered). grpc-js's own reader gathers a whole message, up to one limit for the whole server,
 * before anything sees it; the gate gives each call a reader ({@link LimitedFrames}) that
 * refuses a message from its 5-byte length prefix when it is over the method's
 * `maxRequestBytes`. Responses are encoded here, so one over `maxResponseBytes` is refused with
 * the method named instead of being sent.
 */
import type {
  Metadata,
  ServerInterceptingCall,
  ServerInterceptingCallInterface,
  ServerInterceptor,
  StatusObject,
} from '@grpc/grpc-js'
import { checkBearer, digest, type AuthRefusal, type ResolvedToken } from './auth.js'
import { grpcStatus, RpcError } from './errors.js'
import type { DuckyLogger } from './log.js'
import { DEFAULT_MAX_MESSAGE_BYTES } from './service.js'
import type { Boxed } from './wire.js'

/**
 * A server's own check of a call's metadata: returns (or resolves) to let the call in, throws
 * (or rejects with) an RpcError such as UNAUTHENTICATED or PERMISSION_DENIED to refuse it.
 */
export type Authorize = (metadata: Metadata, method: string) => void | Promise<void>

/** What the gate knows about one method path. */
export type MethodGate = {
  readonly path: string
  /** Whether the call needs the bearer token (not for the Health service). */
  readonly auth: boolean
  readonly maxRequestBytes: number
  readonly maxResponseBytes: number
  /** Encodes a response (the codec's `encodeResponse`); undefined where grpc-js's serializer does it. */
  readonly encode: ((box: Boxed) => Buffer) | undefined
}

/** What every call of one server shares. */
export type GateEnv = {
  readonly log: DuckyLogger
  /** The expected bearer token, or undefined when the server is open. */
  readonly token: ResolvedToken | undefined
  /** Digest of a literal token, computed once. */
  readonly tokenDigest: Buffer | undefined
  /** The server's own check of the metadata (see `ServeOptions.authorize`), after the token. */
  readonly authorize: Authorize | undefined
  /** How a failure becomes a status (the server's mapping: RpcError as is, anything else INTERNAL). */
  readonly toStatus: (err: unknown, method: string) => Partial<StatusObject>
}

/** `4 MiB`, `1.5 GiB`, `512 bytes`. */
export function formatBytes(n: number): string {
  for (const [unit, size] of [
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10],
  ] as const) {
    if (n >= size) return `${Number((n / size).toFixed(1))} ${unit}`
  }
  return `${n} bytes`
}

/**
 * A reader of gRPC's length-prefixed messages that refuses one over `limit` as soon as its
 * prefix is in, before buffering any of its bytes. Messages come out as grpc-js's own reader
 * gives them (prefix included, one buffer each), so the rest of grpc-js treats them alike.
 */
export class LimitedFrames {
  private readonly prefix = Buffer.alloc(5)
  private prefixBytes = 0
  private parts: Buffer[] = []
  private size = 0
  /** Bytes of the current message still to come; -1 while its prefix is read. */
  private missing = -1

  constructor(
    private readonly limit: number,
    /** Makes the error for a message of `bytes` bytes; grpc-js answers RESOURCE_EXHAUSTED with its message. */
    private readonly refusal: { tooLarge(bytes: number): Error },
  ) {}

  write(data: Buffer): Buffer[] {
    const out: Buffer[] = []
    let at = 0
    while (at < data.length) {
      if (this.missing < 0) {
        const n = Math.min(5 - this.prefixBytes, data.length - at)
        data.copy(this.prefix, this.prefixBytes, at, at + n)
        this.prefixBytes += n
        at += n
        if (this.prefixBytes < 5) break
        this.prefixBytes = 0
        this.size = this.prefix.readUInt32BE(1)
        if (this.size > this.limit) throw this.refusal.tooLarge(this.size)
        if (this.size === 0) out.push(Buffer.from(this.prefix))
        else {
          this.parts = [Buffer.from(this.prefix)]
          this.missing = this.size
        }
      } else {
        const n = Math.min(this.missing, data.length - at)
        this.parts.push(data.subarray(at, at + n))
        this.missing -= n
        at += n
        if (this.missing === 0) {
          out.push(Buffer.concat(this.parts, this.size + 5))
          this.parts = []
          this.missing = -1
        }
      }
    }
    return out
  }
}

/**
 * The two fields of grpc-js's BaseServerInterceptingCall (pinned at 1.14.7) that bound what one
 * call buffers: its message reader and the limit on a decompressed message. grpc-js offers only
 * a limit for the whole server; these make it one per method.
 */
type CallReader = { decoder: { write(data: Buffer): Buffer[] }; maxReceiveMessageSize: number }

function isCallReader(call: object): call is CallReader {
  const c = call as Partial<CallReader>
  return typeof c.decoder?.write === 'function' && typeof c.maxReceiveMessageSize === 'number'
}

type Listener = Parameters<ServerInterceptingCallInterface['start']>[0]

const UNAUTHENTICATED = grpcStatus('UNAUTHENTICATED')
const RESOURCE_EXHAUSTED = grpcStatus('RESOURCE_EXHAUSTED')

/**
 * One call behind the gate: it stands between grpc-js's call and the handler's listener. A
 * class, not closures: a call costs one object (see the note on ServerCallContext).
 */
class GatedCall implements ServerInterceptingCallInterface, Listener {
  private listener: Listener | undefined = undefined
  private cancelled = false
  /** Set when grpc-js's call has no reader the gate can bound: every call is then refused. */
  private unbounded = false

  constructor(
    private readonly next: ServerInterceptingCallInterface,
    private readonly gate: MethodGate,
    private readonly env: GateEnv,
  ) {
    if (isCallReader(next)) {
      next.decoder = new LimitedFrames(gate.maxRequestBytes, this)
      next.maxReceiveMessageSize = gate.maxRequestBytes
    } else this.unbounded = true
  }

  // ---- towards the handler: metadata first, and only when the call may go on ----

  start(listener: Listener): void {
    this.listener = listener
    this.next.start(this)
  }

  onReceiveMetadata(metadata: Metadata): void {
    const { env, gate } = this
    if (this.unbounded) {
      env.log.error(
        { method: gate.path },
        'refused call: this @grpc/grpc-js has no per-call message reader to bound; use the version ducky pins',
      )
      return this.refuse(
        grpcStatus('INTERNAL'),
        `${gate.path}: the server cannot bound the size of requests; the server log has the cause`,
      )
    }
    if (!gate.auth || env.token === undefined) return this.authorize(metadata)
    if (env.tokenDigest !== undefined) return this.admit(metadata, checkBearer(metadata, env.tokenDigest))
    ;(env.token as { load: () => Promise<string> }).load().then(
      (t) => this.admit(metadata, checkBearer(metadata, digest(t))),
      (err: unknown) => this.fail(err),
    )
  }

  private admit(metadata: Metadata, refusal: AuthRefusal | undefined): void {
    if (this.cancelled) return
    if (refusal === undefined) return this.authorize(metadata)
    this.env.log.warn(
      { method: this.gate.path, peer: this.next.getPeer(), reason: refusal },
      'refused call: bad bearer token',
    )
    this.refuse(
      UNAUTHENTICATED,
      refusal === 'missing'
        ? 'missing bearer token; pass the server token to connect()'
        : `${refusal} bearer token; check the token passed to connect()`,
    )
  }

  /** Runs the server's own check, if any, then lets the handler have the call. */
  private authorize(metadata: Metadata): void {
    const check = this.gate.auth ? this.env.authorize : undefined
    if (check === undefined) return this.listener!.onReceiveMetadata(metadata)
    let verdict: void | Promise<void>
    try {
      verdict = check(metadata, this.gate.path)
    } catch (err) {
      return this.fail(err)
    }
    if (typeof (verdict as PromiseLike<void> | undefined)?.then !== 'function')
      return this.listener!.onReceiveMetadata(metadata)
    ;(verdict as PromiseLike<void>).then(
      () => {
        if (!this.cancelled) this.listener!.onReceiveMetadata(metadata)
      },
      (err: unknown) => this.fail(err),
    )
  }

  /** Refuses the call with the status of `err` (an RpcError's own; INTERNAL, logged, for anything else). */
  private fail(err: unknown): void {
    if (err instanceof RpcError)
      this.env.log.warn({ method: this.gate.path, peer: this.next.getPeer(), code: err.code }, 'refused call')
    const s = this.env.toStatus(err, this.gate.path)
    this.refuse(s.code ?? grpcStatus('INTERNAL'), s.details ?? `refused call to ${this.gate.path}`)
  }

  private refuse(code: number, details: string): void {
    if (!this.cancelled) this.next.sendStatus({ code, details, metadata: null })
  }

  /** The refusal of a request of `bytes` bytes, for {@link LimitedFrames}. */
  tooLarge(bytes: number): Error {
    const { path, maxRequestBytes: limit } = this.gate
    this.env.log.warn(
      { method: path, peer: this.next.getPeer(), bytes, limit },
      'refused call: request over the size limit',
    )
    return new Error(
      `request to ${path} of ${bytes} bytes is over the limit of ` +
        `${limit} bytes (${formatBytes(limit)}); send less per message, ` +
        `or declare a larger maxRequestBytes on the method`,
    )
  }

  onReceiveMessage(message: unknown): void {
    this.listener!.onReceiveMessage(message)
  }

  onReceiveHalfClose(): void {
    this.listener!.onReceiveHalfClose()
  }

  onCancel(): void {
    this.cancelled = true
    this.listener?.onCancel()
  }

  // ---- towards the client: responses are encoded and checked here ----

  sendMessage(message: unknown, callback: () => void): void {
    const { gate } = this
    if (gate.encode === undefined) return this.next.sendMessage(message, callback)
    let bytes: Buffer
    try {
      bytes = gate.encode(message as Boxed)
    } catch (err) {
      const s = this.env.toStatus(
        err instanceof RpcError
          ? err
          : new RpcError('INTERNAL', `cannot encode a response of ${gate.path}: ${(err as Error).message}`, {
              cause: err,
            }),
        gate.path,
      )
      return this.next.sendStatus({ code: s.code ?? grpcStatus('INTERNAL'), details: s.details ?? '', metadata: null })
    }
    if (bytes.length > gate.maxResponseBytes) {
      this.env.log.error(
        { method: gate.path, bytes: bytes.length, limit: gate.maxResponseBytes },
        'refused response: over the size limit',
      )
      return this.next.sendStatus({
        code: RESOURCE_EXHAUSTED,
        details:
          `response of ${gate.path} of ${bytes.length} bytes is over the ` +
          `limit of ${gate.maxResponseBytes} bytes (` +
          `${formatBytes(gate.maxResponseBytes)}); the server must send ` +
          `less per message, or declare a larger maxResponseBytes on the method`,
        metadata: null,
      })
    }
    // grpc-js copies the bytes into its frame before this returns, so a reused buffer is safe.
    this.next.sendMessage(bytes, callback)
  }

  sendMetadata(metadata: Metadata): void {
    this.next.sendMetadata(metadata)
  }

  sendStatus(status: Parameters<ServerInterceptingCallInterface['sendStatus']>[0]): void {
    this.next.sendStatus(status)
  }

  startRead(): void {
    this.next.startRead()
  }

  getPeer(): string {
    return this.next.getPeer()
  }

  getDeadline(): ReturnType<ServerInterceptingCallInterface['getDeadline']> {
    return this.next.getDeadline()
  }

  getHost(): string {
    return this.next.getHost()
  }

  getAuthContext(): ReturnType<ServerInterceptingCallInterface['getAuthContext']> {
    return this.next.getAuthContext()
  }

  getConnectionInfo(): ReturnType<ServerInterceptingCallInterface['getConnectionInfo']> {
    return this.next.getConnectionInfo()
  }

  getMetricsRecorder(): ReturnType<ServerInterceptingCallInterface['getMetricsRecorder']> {
    return this.next.getMetricsRecorder()
  }
}

/**
 * The grpc-js server interceptor of the gate, for the methods in `gates` (by path). It must be
 * the server's only interceptor: it bounds the reader of the call grpc-js hands it.
 */
export function callGate(gates: ReadonlyMap<string, MethodGate>, env: GateEnv): ServerInterceptor {
  return (descriptor, call) => {
    const gate = gates.get(descriptor.path) ?? fallbackGate(descriptor.path)
    // grpc-js uses only the ServerInterceptingCallInterface of what an interceptor returns.
    return new GatedCall(call, gate, env) as unknown as ServerInterceptingCall
  }
}

/** A path grpc-js routed but ducky did not register cannot happen; if it does, it gets the strictest gate. */
function fallbackGate(path: string): MethodGate {
  return {
    path,
    auth: true,
    maxRequestBytes: DEFAULT_MAX_MESSAGE_BYTES,
    maxResponseBytes: DEFAULT_MAX_MESSAGE_BYTES,
    encode: undefined,
  }
}
