/**
 * @module Service definitions: a name and methods, each a kind plus zod request and response
 * schemas. One definition gives both the server (`serve`) and the typed client (`connect`).
 */
import type { z } from 'zod'
import { RpcError } from './errors.js'

export const METHOD_KINDS = ['unary', 'serverStream', 'bidi'] as const
export type MethodKind = (typeof METHOD_KINDS)[number]

/** One method of a service: its kind, schemas and retry safety. */
export type MethodDef<
  K extends MethodKind = MethodKind,
  Req extends z.ZodType = z.ZodType,
  Res extends z.ZodType = z.ZodType,
> = {
  readonly kind: K
  readonly request: Req
  readonly response: Res
  /** Safe to send twice: the client retries it on UNAVAILABLE and DEADLINE_EXCEEDED. */
  readonly idempotent: boolean
  /** How messages are encoded; see {@link MessageCodec}. */
  readonly codec: MessageCodec
  /** Largest request message, in bytes; a larger one is refused (RESOURCE_EXHAUSTED) from its length prefix, unread. */
  readonly maxRequestBytes: number
  /** Largest response message, in bytes; the server refuses to send a larger one (RESOURCE_EXHAUSTED). */
  readonly maxResponseBytes: number
}

/** 4 MiB: the message limit, each way, of a method that declares none (control calls). */
export const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

/**
 * `ducky`: JSON structure plus raw binary segments (the default, see wire.ts).
 * `bytes`: every message is a single Uint8Array sent as the gRPC message itself, with no header
 * and no copy; for byte pipes such as tunnels. Both schemas must accept (only) Uint8Array.
 */
export type MessageCodec = 'ducky' | 'bytes'

export type MethodOptions = {
  /** The method may run more than once for one call; enables client retries. @default false */
  idempotent?: boolean
  /** @default 'ducky' */
  codec?: MessageCodec
  /** Largest request message, in bytes, for methods that carry bulk data. @default 4 MiB ({@link
   * DEFAULT_MAX_MESSAGE_BYTES}) */
  maxRequestBytes?: number
  /** Largest response message, in bytes, for methods that carry bulk data. @default 4 MiB ({@link
   * DEFAULT_MAX_MESSAGE_BYTES}) */
  maxResponseBytes?: number
}

function method<K extends MethodKind, Req extends z.ZodType, Res extends z.ZodType>(
  kind: K,
  request: Req,
  response: Res,
  idempotent: boolean,
  opts: MethodOptions,
): MethodDef<K, Req, Res> {
  return {
    kind,
    request,
    response,
    idempotent,
    codec: opts.codec ?? 'ducky',
    maxRequestBytes: opts.maxRequestBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    maxResponseBytes: opts.maxResponseBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
  }
}

/** A request → one response method. */
export function unary<Req extends z.ZodType, Res extends z.ZodType>(
  request: Req,
  response: Res,
  opts: MethodOptions = {},
): MethodDef<'unary', Req, Res> {
  return method('unary', request, response, opts.idempotent ?? false, opts)
}

/** A request → a stream of responses. `idempotent` lets the client retry before the first response. */
export function serverStream<Req extends z.ZodType, Res extends z.ZodType>(
  request: Req,
  response: Res,
  opts: MethodOptions = {},
): MethodDef<'serverStream', Req, Res> {
  return method('serverStream', request, response, opts.idempotent ?? false, opts)
}

/** A stream of requests ↔ a stream of responses, both open at once. Never retried. The limits apply to each message. */
export function bidi<Req extends z.ZodType, Res extends z.ZodType>(
  request: Req,
  response: Res,
  opts: Omit<MethodOptions, 'idempotent'> = {},
): MethodDef<'bidi', Req, Res> {
  return method('bidi', request, response, false, opts)
}

export type Methods = Record<string, MethodDef>

/** A service: a dotted name (`marin.iris.Controller`) and its methods. */
export type ServiceDef<M extends Methods = Methods> = {
  readonly name: string
  readonly methods: M
}

/** The largest message the 4-byte length prefix of a gRPC message can announce. */
const MAX_MESSAGE_BYTES = 2 ** 32 - 1

/** Names a client keeps for itself, so no method may use them. */
export const RESERVED_METHOD_NAMES = ['close', 'ready', 'then'] as const

const SERVICE_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/
const METHOD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Defines a service. Method paths on the wire are `/<name>/<method>`.
 * @example
 * const Echo = defineService({
 *   name: 'demo.Echo',
 *   methods: {
 *     ping: unary(z.object({ text: z.string() }), z.object({ text: z.string() }), { idempotent: true }),
 *     watch: serverStream(z.object({ n: z.number() }), z.object({ i: z.number() })),
 *   },
 * })
 */
export function defineService<const M extends Methods>(def: { name: string; methods: M }): ServiceDef<M> {
  if (!SERVICE_NAME.test(def.name)) {
    throw new RpcError(
      'INVALID_ARGUMENT',
      `service name ${JSON.stringify(def.name)} is not a dotted ` +
        `identifier; use a name like "marin.iris.Controller"`,
    )
  }
  for (const [name, m] of Object.entries(def.methods)) {
    if (!METHOD_NAME.test(name) || (RESERVED_METHOD_NAMES as readonly string[]).includes(name)) {
      throw new RpcError(
        'INVALID_ARGUMENT',
        `service ${def.name}: method name ${JSON.stringify(name)} is not ` +
          `allowed; use an identifier other than ` +
          `${RESERVED_METHOD_NAMES.join(', ')}`,
      )
    }
    if (m.codec !== 'ducky' && m.codec !== 'bytes') {
      throw new RpcError(
        'INVALID_ARGUMENT',
        `service ${def.name}: method ${name} has codec ${JSON.stringify(m.codec)}; use 'ducky' or 'bytes'`,
      )
    }
    if (!(METHOD_KINDS as readonly string[]).includes(m.kind)) {
      throw new RpcError(
        'INVALID_ARGUMENT',
        `service ${def.name}: method ${name} has kind ` +
          `${JSON.stringify(m.kind)}; build it with unary(), ` +
          `serverStream() or bidi()`,
      )
    }
    for (const field of ['maxRequestBytes', 'maxResponseBytes'] as const) {
      const n = m[field]
      if (!Number.isSafeInteger(n) || n <= 0 || n > MAX_MESSAGE_BYTES) {
        throw new RpcError(
          'INVALID_ARGUMENT',
          `service ${def.name}: method ${name} has ${field}=${n}; pass a ` +
            `byte count from 1 to ${MAX_MESSAGE_BYTES} (the largest a gRPC ` +
            `message can say it is)`,
        )
      }
    }
  }
  return Object.freeze({ name: def.name, methods: Object.freeze({ ...def.methods }) })
}

/** The gRPC path of a method: `/<service>/<method>`. */
export function methodPath(def: ServiceDef, method: string): string {
  return `/${def.name}/${method}`
}
