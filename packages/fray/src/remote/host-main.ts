/**
 * @module Entry point of a hosted actor's process (an iris task, or a local process in `grpc`
 * mode): serves `marin.fray.Actor` over ducky, registers with the driver named by
 * `FRAY_DRIVER_ADDRESS`, builds the actor `FRAY_ACTOR_NAME`, and serves until told to stop.
 */
import { connect, serve } from '@marin/ducky'
import { ActorRuntime } from '../actor-runtime.js'
import { cleanUpOnSigterm } from '../collective/socket-files.js'
import { FrayError } from '../errors.js'
import { errorPayload } from '../internal/wire.js'
import { type HostAddresses, hostAddresses } from './advertise.js'
import { ActorService, DriverService } from './services.js'

cleanUpOnSigterm()

const driverAddress = process.env.FRAY_DRIVER_ADDRESS
const name = process.env.FRAY_ACTOR_NAME
if (!driverAddress || !name) {
  process.stderr.write(
    'fray actor host: FRAY_DRIVER_ADDRESS and FRAY_ACTOR_NAME must ' +
      'be set; this process is started by a fray client\n',
  )
  process.exit(2)
}
// Where this host listens; `FRAY_ADVERTISE_HOST` is how others reach it (a task on another machine).
let addresses: HostAddresses
try {
  addresses = hostAddresses(process.env)
} catch (err) {
  // Told to the driver too, so that its error names the address and the variable.
  const message = (err as Error).message
  process.stderr.write(`${message}\n`)
  const driver = connect(DriverService, driverAddress, { deadlineMs: 10_000 })
  await driver
    .register({ name, address: '127.0.0.1:1', pid: process.pid })
    .then(() => driver.built({ name, error: { name: 'FrayError', message, code: 'ACTOR_START_FAILED' } }))
    .catch(() => {})
  driver.close()
  process.exit(2)
}
const listenHost = addresses.listen
const advertise = addresses.advertise
// The actor's mesh links and parameter shards give out the same address.
process.env.FRAY_ADVERTISE_HOST = advertise

let runtime: ActorRuntime | null = null
let stopping: (() => void) | null = null
const stopped = new Promise<void>((r) => (stopping = r))

const outcome = async (p: () => Promise<unknown>) => {
  try {
    return { value: await p() }
  } catch (err) {
    return { error: errorPayload(err) }
  }
}

const server = await serve(
  ActorService,
  {
    call: ({ method, args }) =>
      outcome(() =>
        runtime
          ? runtime.call(method, args)
          : Promise.reject(new FrayError('ACTOR_NOT_FOUND', `actor ${name} is not built yet`)),
      ),
    control: ({ op, arg }) => outcome(() => runtime!.control(op, arg)),
    async *watch(_req, ctx) {
      yield { pid: process.pid }
      await Promise.race([stopped, new Promise((r) => ctx.signal.addEventListener('abort', r))])
    },
    stop: async () => {
      setImmediate(() => stopping?.())
      return {}
    },
  },
  { host: listenHost, port: 0 },
)

const driver = connect(DriverService, driverAddress)
const { spec } = await driver.register({ name, address: `${advertise}:${server.port}`, pid: process.pid })
try {
  runtime = await ActorRuntime.create(spec)
  await driver.built({ name })
} catch (err) {
  await driver.built({ name, error: errorPayload(err) })
  process.exit(1)
}
driver.close()

await stopped
await runtime.close()
await server.shutdown({ graceMs: 1_000 })
process.exit(0)
