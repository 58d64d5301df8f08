/**
 * @module The standard `grpc.health.v1.Health` service, served by every ducky server so that
 * ordinary gRPC health probes (grpc_health_probe, Kubernetes, load balancers) work.
 *
 * Its two messages are tiny protobufs, encoded here by hand:
 * `HealthCheckRequest { string service = 1; }` and `HealthCheckResponse { ServingStatus status = 1; }`.
 * It answers without a bearer token: a probe learns only whether the server is up.
 */
import type {
  ServerUnaryCall,
  ServerWritableStream,
  sendUnaryData,
  UntypedServiceImplementation,
  ServiceDefinition,
} from '@grpc/grpc-js'
import { grpcStatus } from './errors.js'

export const HEALTH_SERVICE = 'grpc.health.v1.Health'

export const SERVING_STATUSES = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'] as const
export type ServingStatus = (typeof SERVING_STATUSES)[number]

function readVarint(buf: Buffer, pos: number): [number, number] {
  let value = 0
  let shift = 0
  for (;;) {
    if (pos >= buf.length) throw new Error('truncated varint')
    const b = buf[pos++]!
    value += (b & 0x7f) * 2 ** shift
    if (b < 0x80) return [value, pos]
    shift += 7
    if (shift > 63) throw new Error('varint too long')
  }
}

function writeVarint(n: number, out: number[]): void {
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80)
    n = Math.floor(n / 0x80)
  }
  out.push(n)
}

/** Decodes a HealthCheckRequest (boxed: grpc-js takes a falsy request for a missing one). */
function decodeRequestBoxed(buf: Buffer): { service: string } {
  return { service: decodeHealthRequest(buf) }
}

/** Decodes a HealthCheckRequest: field 1 (string) is the service name; unknown fields are skipped. */
export function decodeHealthRequest(buf: Buffer): string {
  let service = ''
  let pos = 0
  while (pos < buf.length) {
    let key: number
    ;[key, pos] = readVarint(buf, pos)
    const field = Math.floor(key / 8)
    const wire = key & 7
    if (wire === 0) [, pos] = readVarint(buf, pos)
    else if (wire === 1) pos += 8
    else if (wire === 5) pos += 4
    else if (wire === 2) {
      let len: number
      ;[len, pos] = readVarint(buf, pos)
      if (pos + len > buf.length) throw new Error('truncated field')
      if (field === 1) service = buf.toString('utf8', pos, pos + len)
      pos += len
    } else throw new Error(`unsupported wire type ${wire}`)
  }
  if (pos > buf.length) throw new Error('truncated message')
  return service
}

export function encodeHealthRequest(service: string): Buffer {
  if (service === '') return Buffer.alloc(0)
  const name = Buffer.from(service, 'utf8')
  const head: number[] = [0x0a]
  writeVarint(name.length, head)
  return Buffer.concat([Buffer.from(head), name])
}

/** Encodes a HealthCheckResponse; proto3 leaves out a zero (UNKNOWN) status. */
export function encodeHealthResponse(status: ServingStatus): Buffer {
  const n = SERVING_STATUSES.indexOf(status)
  return n === 0 ? Buffer.alloc(0) : Buffer.from([0x08, n])
}

export function decodeHealthResponse(buf: Buffer): ServingStatus {
  let status = 0
  let pos = 0
  while (pos < buf.length) {
    let key: number
    ;[key, pos] = readVarint(buf, pos)
    if (key === 0x08) [status, pos] = readVarint(buf, pos)
    else if ((key & 7) === 0) [, pos] = readVarint(buf, pos)
    else if ((key & 7) === 2) {
      let len: number
      ;[len, pos] = readVarint(buf, pos)
      pos += len
    } else throw new Error(`unsupported wire type ${key & 7}`)
  }
  return SERVING_STATUSES[status] ?? 'UNKNOWN'
}

/** Serving status per service name ('' is the server as a whole), with watchers. */
export class HealthStatus {
  readonly #statuses = new Map<string, ServingStatus>()
  readonly #watchers = new Map<string, Set<(s: ServingStatus) => void>>()
  readonly #closers = new Set<() => void>()

  /** Sets the status of `service` ('' for the whole server) and tells its watchers. */
  set(service: string, status: ServingStatus): void {
    if (this.#statuses.get(service) === status) return
    this.#statuses.set(service, status)
    for (const w of this.#watchers.get(service) ?? []) w(status)
  }

  get(service: string): ServingStatus | undefined {
    return this.#statuses.get(service)
  }

  /** Marks everything NOT_SERVING and ends every Watch stream (used at shutdown). */
  close(): void {
    for (const s of this.#statuses.keys()) this.set(s, 'NOT_SERVING')
    for (const c of [...this.#closers]) c()
  }

  /** The grpc-js definition and implementation of the Health service over this status table. */
  grpcService(): { definition: ServiceDefinition; implementation: UntypedServiceImplementation } {
    const id = (b: Buffer) => b
    const definition: ServiceDefinition = {
      Check: {
        path: `/${HEALTH_SERVICE}/Check`,
        requestStream: false,
        responseStream: false,
        requestSerialize: id,
        requestDeserialize: decodeRequestBoxed,
        responseSerialize: encodeHealthResponse,
        responseDeserialize: decodeHealthResponse,
      },
      Watch: {
        path: `/${HEALTH_SERVICE}/Watch`,
        requestStream: false,
        responseStream: true,
        requestSerialize: id,
        requestDeserialize: decodeRequestBoxed,
        responseSerialize: encodeHealthResponse,
        responseDeserialize: decodeHealthResponse,
      },
    }
    const implementation: UntypedServiceImplementation = {
      Check: (call: ServerUnaryCall<{ service: string }, ServingStatus>, callback: sendUnaryData<ServingStatus>) => {
        const status = this.#statuses.get(call.request.service)
        if (status === undefined)
          callback({
            code: grpcStatus('NOT_FOUND'),
            details: `unknown service ${JSON.stringify(call.request.service)}`,
          })
        else callback(null, status)
      },
      Watch: (call: ServerWritableStream<{ service: string }, ServingStatus>) => {
        const service = call.request.service
        const watcher = (s: ServingStatus) => call.write(s)
        let set = this.#watchers.get(service)
        if (set === undefined) this.#watchers.set(service, (set = new Set()))
        set.add(watcher)
        const close = () => {
          set.delete(watcher)
          this.#closers.delete(close)
          if (!call.cancelled && !call.writableEnded) call.end()
        }
        this.#closers.add(close)
        call.on('cancelled', close)
        call.on('error', close)
        call.write(this.#statuses.get(service) ?? 'SERVICE_UNKNOWN')
      },
    }
    return { definition, implementation }
  }
}
