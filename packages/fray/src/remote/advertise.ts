/**
 * @module Where an actor host listens and the address it gives out (`FRAY_LISTEN_HOST`, `FRAY_ADVERTISE_HOST`),
 * checked before the host serves anything: an advertised address others cannot dial is refused naming the address,
 * the variable and what to set instead, rather than surfacing later as a call or a mesh link that never connects.
 */
import { isIP } from 'node:net'
import { networkInterfaces } from 'node:os'

export type HostAddresses = { listen: string; advertise: string }

const WILDCARDS = new Set(['0.0.0.0', '::', '[::]'])
const isLoopback = (h: string) => h === 'localhost' || h === '::1' || /^127\./.test(h)
const bare = (h: string) => h.replace(/^\[(.*)\]$/, '$1')

/** This host's own interface addresses. */
export function localAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined)
    .map((a) => a.address)
}

/**
 * The host's listen and advertised addresses from `env`, or an Error saying why others could not reach the
 * advertised one. A host listening on every interface (`FRAY_LISTEN_HOST=0.0.0.0`) without `FRAY_ADVERTISE_HOST`
 * gives out `IRIS_WORKER_HOST`, the address its iris worker registered by. A host whose driver
 * (`FRAY_DRIVER_ADDRESS`, host:port) is on another host must not advertise loopback.
 */
export function hostAddresses(env: NodeJS.ProcessEnv, local: readonly string[] = localAddresses()): HostAddresses {
  const listen = env.FRAY_LISTEN_HOST || '127.0.0.1'
  // Listening on every interface as an iris task, unless told otherwise: the address its worker registered by.
  const fromWorker = !env.FRAY_ADVERTISE_HOST && WILDCARDS.has(listen) ? env.IRIS_WORKER_HOST : undefined
  const given = env.FRAY_ADVERTISE_HOST || fromWorker
  const advertise = given || listen
  const what = fromWorker
    ? `IRIS_WORKER_HOST=${advertise} (FRAY_ADVERTISE_HOST unset)`
    : given
      ? `FRAY_ADVERTISE_HOST=${advertise}`
      : `FRAY_LISTEN_HOST=${listen} (FRAY_ADVERTISE_HOST unset)`
  const mine = `this host's addresses: ${local.filter((a) => !isLoopback(a)).join(', ') || 'none but loopback'}`
  if (WILDCARDS.has(advertise))
    throw new Error(
      `fray actor host: ${what} is not an address others can dial; set FRAY_ADVERTISE_HOST to one of ${mine}`,
    )
  const ip = bare(advertise)
  if (isIP(ip) !== 0 && !local.includes(ip))
    throw new Error(
      `fray actor host: ${what} is not an address of this host (${mine}); ` +
        'set it to the address the other hosts reach this one by',
    )
  if (!WILDCARDS.has(listen) && isIP(bare(listen)) !== 0 && isIP(ip) !== 0 && bare(listen) !== ip)
    throw new Error(
      `fray actor host: FRAY_ADVERTISE_HOST=${advertise} but FRAY_LISTEN_HOST=${listen}: nothing listens on ` +
        `${advertise}; set FRAY_LISTEN_HOST to ${advertise} (or 0.0.0.0)`,
    )
  const driverHost = bare((env.FRAY_DRIVER_ADDRESS ?? '').replace(/:\d+$/, ''))
  if (isLoopback(ip) && driverHost !== '' && !isLoopback(driverHost))
    throw new Error(
      `fray actor host: ${what} is a loopback address, but the driver is at ${env.FRAY_DRIVER_ADDRESS}, on ` +
        `another host that cannot reach it; set FRAY_ADVERTISE_HOST (and FRAY_LISTEN_HOST) to one of ${mine}`,
    )
  return { listen, advertise }
}
