/**
 * @module ducky against raw @grpc/grpc-js on loopback, in the same run and process.
 *
 * The baseline is a hand-written grpc-js service moving the same payloads (unary messages as
 * JSON, which any service must serialize somehow; stream chunks and tunnel bytes as raw Buffers
 * with no copy; no validation, no auth): what ducky adds is its wire format's header and binary
 * table, zod validation of requests and responses (server side), boxing and the typed client. Each metric alternates
 * ours and baseline for several
 * rounds and reports the medians.
 */
import { once } from 'node:events'
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net'
import {
  Client,
  Metadata,
  Server,
  ServerCredentials,
  credentials,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js'
import { emit, median } from '@marin/rigging/bench'
import { z } from 'zod'
import { connect, defineService, openTunnel, serve, serverStream, tunnelService, unary } from '../src/index.js'
import type { DuckyLogger } from '../src/index.js'

const ROUNDS = Number(process.env.DUCKY_BENCH_ROUNDS ?? 5)
/** `DUCKY_BENCH_ONLY=unary,stream,tunnel` (any subset) runs only those metrics. */
const ONLY = process.env.DUCKY_BENCH_ONLY?.split(',')
const runs = (topic: 'unary' | 'stream' | 'tunnel') => ONLY === undefined || ONLY.includes(topic)
const SEQ_CALLS = 2000
const PAR_CALLS = 6400
const IN_FLIGHT = 64
const CHUNK_FLOATS = 256 * 1024 // 1 MiB of Float32
const STREAM_CHUNKS = 256 // 256 MiB per run
const TUNNEL_BYTES = 128 * 1024 * 1024

const quiet: DuckyLogger = { debug() {}, info() {}, warn() {}, error() {} }
const log = (msg: string) => process.stderr.write(`ducky bench: ${msg}\n`)

// ---- ducky side -------------------------------------------------------------------------------
const Bench = defineService({
  name: 'ducky.bench.Bench',
  methods: {
    echo: unary(z.object({ text: z.string(), n: z.number() }), z.object({ text: z.string(), n: z.number() })),
    floats: serverStream(z.object({ chunks: z.number().int() }), z.object({ chunk: z.instanceof(Float32Array) })),
  },
})
const chunk = new Float32Array(CHUNK_FLOATS).fill(1.5)

// ---- raw grpc-js side -------------------------------------------------------------------------
const id = (b: Buffer) => b
// A hand-written service still has to turn its messages into bytes: JSON, as ducky's body is.
const toJson = (v: unknown) => Buffer.from(JSON.stringify(v))
const fromJson = (b: Buffer): unknown => JSON.parse(b.toString('utf8'))
const rawDef: ServiceDefinition = {
  echo: {
    path: '/raw.Bench/echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: toJson,
    requestDeserialize: fromJson,
    responseSerialize: toJson,
    responseDeserialize: fromJson,
  },
  floats: {
    path: '/raw.Bench/floats',
    requestStream: false,
    responseStream: true,
    requestSerialize: id,
    requestDeserialize: id,
    responseSerialize: id,
    responseDeserialize: id,
  },
  tunnel: {
    path: '/raw.Bench/tunnel',
    requestStream: true,
    responseStream: true,
    requestSerialize: id,
    requestDeserialize: id,
    responseSerialize: id,
    responseDeserialize: id,
  },
}
const rawChunk = Buffer.from(chunk.buffer)
const asFloats = (b: Buffer) =>
  b.byteOffset % 4 === 0
    ? new Float32Array(b.buffer, b.byteOffset, b.length / 4)
    : new Float32Array(new Uint8Array(b).buffer)

async function rawServer(tunnelTarget: number): Promise<{ server: Server; address: string }> {
  const server = new Server({ 'grpc.max_receive_message_length': 256 << 20, 'grpc.max_send_message_length': 256 << 20 })
  const impl: UntypedServiceImplementation = {
    echo: (call: any, cb: any) => cb(null, call.request),
    floats: async (call: any) => {
      const n = (call.request as Buffer).readUInt32LE(0)
      for (let i = 0; i < n && !call.cancelled; i++) if (!call.write(rawChunk)) await once(call, 'drain')
      call.end()
    },
    tunnel: (call: any) => {
      const sock = createConnection({ host: '127.0.0.1', port: tunnelTarget, allowHalfOpen: true })
      sock.on('data', (d: Buffer) => {
        if (!call.write(d)) {
          sock.pause()
          call.once('drain', () => sock.resume())
        }
      })
      sock.on('end', () => call.end())
      call.on('data', (d: Buffer) => sock.write(d))
      call.on('end', () => sock.end())
      call.on('error', () => sock.destroy())
    },
  }
  server.addService(rawDef, impl)
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  )
  return { server, address: `127.0.0.1:${port}` }
}

/** A hand-written raw tunnel client: local port → one bidi call per connection. */
async function rawTunnel(client: Client): Promise<{ port: number; close(): void }> {
  const server = createServer({ allowHalfOpen: true }, (sock) => {
    const call = client.makeBidiStreamRequest('/raw.Bench/tunnel', id, id, new Metadata())
    call.on('data', (d: Buffer) => {
      if (!sock.write(d)) {
        call.pause()
        sock.once('drain', () => call.resume())
      }
    })
    call.on('end', () => sock.end())
    call.on('error', () => sock.destroy())
    sock.on('data', (d: Buffer) => call.write(d))
    sock.on('end', () => call.end())
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { port: (server.address() as AddressInfo).port, close: () => server.close() }
}

// ---- shared target for tunnels: sends TUNNEL_BYTES to each connection, then ends ----------------
const block = Buffer.alloc(1 << 20, 7)
const source = createServer((sock) => {
  let left = TUNNEL_BYTES
  const pump = () => {
    while (left > 0) {
      left -= block.length
      if (!sock.write(block)) return void sock.once('drain', pump)
    }
    sock.end()
  }
  pump()
  sock.on('error', () => {})
})
await new Promise<void>((r) => source.listen(0, '127.0.0.1', r))
const sourcePort = (source.address() as AddressInfo).port

async function drainTunnel(port: number): Promise<number> {
  const sock: Socket = createConnection({ host: '127.0.0.1', port })
  let n = 0
  sock.on('data', (d: Buffer) => (n += d.length))
  await once(sock, 'end')
  sock.destroy()
  if (n !== TUNNEL_BYTES) throw new Error(`tunnel delivered ${n} of ${TUNNEL_BYTES} bytes`)
  return n
}

// ---- setup ------------------------------------------------------------------------------------
const ducky = await serve(
  Bench,
  {
    echo: (req) => req,
    floats: async function* ({ chunks }, ctx) {
      for (let i = 0; i < chunks && !ctx.signal.aborted; i++) yield { chunk }
    },
  },
  { logger: quiet, services: [tunnelService({ allow: [`127.0.0.1:${sourcePort}`], logger: quiet })] },
)
const client = connect(Bench, ducky.address, { logger: quiet })
const raw = await rawServer(sourcePort)
const rawClient = new Client(raw.address, credentials.createInsecure(), {
  'grpc.max_receive_message_length': 256 << 20,
})
const duckyTunnel = await openTunnel({ via: ducky.address, to: `127.0.0.1:${sourcePort}`, listen: 0, logger: quiet })
const rawTun = await rawTunnel(rawClient)

const echoReq = { text: 'ping from the benchmark', n: 42 }
// The baseline sets the same per-call deadline as ducky's default (30 s): grpc-js's deadline
// timers are part of any production call, not something ducky adds.
const rawUnary = (req: typeof echoReq) =>
  new Promise<unknown>((res, rej) =>
    rawClient.makeUnaryRequest(
      '/raw.Bench/echo',
      toJson,
      fromJson,
      req,
      new Metadata(),
      { deadline: Date.now() + 30_000 },
      (e, r) => (e ? rej(e) : res(r)),
    ),
  )

/** Wall and CPU seconds of one run. Client and server share this process, so CPU time is the
 * whole cost of the work, and it is far less disturbed than wall time on a busy machine. */
async function seconds(fn: () => Promise<unknown>): Promise<{ wall: number; cpu: number }> {
  const c0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  await fn()
  const c = process.cpuUsage(c0)
  return { wall: Number(process.hrtime.bigint() - t0) / 1e9, cpu: (c.user + c.system) / 1e6 }
}

type Timing = { ours: number; base: number; oursCpu: number; baseCpu: number }

/** Alternates ours and baseline for ROUNDS rounds after one warm-up of each; medians in seconds. */
async function compare(name: string, ours: () => Promise<unknown>, base: () => Promise<unknown>): Promise<Timing> {
  await ours()
  await base()
  const a: { wall: number; cpu: number }[] = []
  const b: { wall: number; cpu: number }[] = []
  // The order flips every round, so neither side always runs right after the other (whose
  // garbage the next run's collections would pay for).
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) {
      a.push(await seconds(ours))
      b.push(await seconds(base))
    } else {
      b.push(await seconds(base))
      a.push(await seconds(ours))
    }
  }
  const show = (xs: { wall: number; cpu: number }[]) =>
    xs.map((x) => `${x.wall.toFixed(3)}/${x.cpu.toFixed(3)}`).join(' ')
  log(`${name} (wall/cpu s): ours ${show(a)}; baseline ${show(b)}`)
  // Each round's pair ran back to back under the same load; the median of their ratios is far
  // steadier on a shared machine than the ratio of the medians the JSON lines carry.
  const paired = (k: 'wall' | 'cpu') => median(a.map((x, i) => b[i]![k] / x[k])).toFixed(3)
  log(`${name}: paired ratio (median over rounds, baseline ÷ ours time): wall ${paired('wall')}, cpu ${paired('cpu')}`)
  return {
    ours: median(a.map((x) => x.wall)),
    base: median(b.map((x) => x.wall)),
    oursCpu: median(a.map((x) => x.cpu)),
    baseCpu: median(b.map((x) => x.cpu)),
  }
}

/** The CPU cost per unit of work, ours against baseline (lower is better). */
function emitCpu(metric: string, t: Timing, units: number, unit: string, scale: number): void {
  emit({
    bench: 'ducky',
    metric,
    value: (t.oursCpu / units) * scale,
    unit,
    baseline: (t.baseCpu / units) * scale,
    lowerIsBetter: true,
  })
}

async function inFlight(total: number, width: number, call: () => Promise<unknown>): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next++ < total) await call()
    }),
  )
}

if (runs('unary')) {
  const t = await compare(
    'unary sequential',
    async () => {
      for (let i = 0; i < SEQ_CALLS; i++) await client.echo(echoReq)
    },
    async () => {
      for (let i = 0; i < SEQ_CALLS; i++) await rawUnary(echoReq)
    },
  )
  emit({
    bench: 'ducky',
    metric: 'unary_calls_per_s_sequential',
    value: SEQ_CALLS / t.ours,
    unit: 'calls/s',
    baseline: SEQ_CALLS / t.base,
  })
  emitCpu('unary_cpu_us_per_call_sequential', t, SEQ_CALLS, 'us/call', 1e6)
}
if (runs('unary')) {
  const t = await compare(
    `unary ${IN_FLIGHT} in flight`,
    () => inFlight(PAR_CALLS, IN_FLIGHT, () => client.echo(echoReq)),
    () => inFlight(PAR_CALLS, IN_FLIGHT, () => rawUnary(echoReq)),
  )
  emit({
    bench: 'ducky',
    metric: `unary_calls_per_s_${IN_FLIGHT}_in_flight`,
    value: PAR_CALLS / t.ours,
    unit: 'calls/s',
    baseline: PAR_CALLS / t.base,
  })
  emitCpu(`unary_cpu_us_per_call_${IN_FLIGHT}_in_flight`, t, PAR_CALLS, 'us/call', 1e6)
}
if (runs('stream')) {
  const mb = (STREAM_CHUNKS * chunk.byteLength) / 1e6
  const n = Buffer.alloc(4)
  n.writeUInt32LE(STREAM_CHUNKS)
  const t = await compare(
    'server stream 1 MiB Float32Array chunks',
    async () => {
      let got = 0
      for await (const { chunk: c } of client.floats({ chunks: STREAM_CHUNKS })) got += c.length
      if (got !== STREAM_CHUNKS * CHUNK_FLOATS) throw new Error(`stream delivered ${got} floats`)
    },
    async () => {
      let got = 0
      const call = rawClient.makeServerStreamRequest('/raw.Bench/floats', id, id, n)
      // Read as Float32Arrays, as a raw grpc-js user must: a view when aligned, else a copy.
      for await (const b of call as AsyncIterable<Buffer>) got += asFloats(b).length
      if (got !== STREAM_CHUNKS * CHUNK_FLOATS) throw new Error(`raw stream delivered ${got} floats`)
    },
  )
  emit({ bench: 'ducky', metric: 'server_stream_mb_per_s', value: mb / t.ours, unit: 'MB/s', baseline: mb / t.base })
  emitCpu('server_stream_cpu_ms_per_mb', t, mb, 'ms/MB', 1e3)
}
if (runs('tunnel')) {
  const mb = TUNNEL_BYTES / 1e6
  const t = await compare(
    'tunnel',
    () => drainTunnel(duckyTunnel.port),
    () => drainTunnel(rawTun.port),
  )
  emit({ bench: 'ducky', metric: 'tunnel_mb_per_s', value: mb / t.ours, unit: 'MB/s', baseline: mb / t.base })
  emitCpu('tunnel_cpu_ms_per_mb', t, mb, 'ms/MB', 1e3)
}

await duckyTunnel.close()
rawTun.close()
client.close()
rawClient.close()
await ducky.shutdown({ graceMs: 1000 })
raw.server.forceShutdown()
source.close()
// Lingering loopback sockets of the raw tunnel would keep the process alive; the numbers are out.
process.exit(0)
