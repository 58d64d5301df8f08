/**
 * @module The Unix socket files of this process's mesh members: removed at exit and on SIGTERM,
 * and the identity of this machine, so that a socket path is only dialed where it exists.
 */
import { readFileSync, readlinkSync, rmSync } from 'node:fs'
import { hostname } from 'node:os'

const socketPaths = new Set<string>()
/** Socket files go with the process even when nobody closes the mesh (a SIGKILL still leaves them). */
export function removeAtExit(path: string): void {
  if (socketPaths.size === 0) process.once('exit', removeSocketFiles)
  socketPaths.add(path)
}

/** Removes this process's mesh socket files; for signal handlers, which skip 'exit' hooks. */
export function removeSocketFiles(): void {
  for (const p of socketPaths) rmSync(p, { force: true })
  socketPaths.clear()
}

/** On SIGTERM, removes the socket files and dies of the same signal (so the exit still reads as SIGTERM). */
export function cleanUpOnSigterm(): void {
  process.once('SIGTERM', () => {
    removeSocketFiles()
    process.kill(process.pid, 'SIGTERM')
  })
}

let machineId: string | undefined
/**
 * Identifies this network host (machine, boot and network namespace), so that a Unix socket path is only used
 * where it exists and by members of the same host: members in other network namespaces of one machine (containers,
 * test hosts) are other hosts, reached over TCP at the address they advertise.
 */
export function thisMachine(): string {
  if (machineId === undefined) {
    let boot = ''
    let netns = ''
    try {
      boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
      netns = readlinkSync('/proc/self/ns/net')
    } catch {
      /* not Linux: the host name alone */
    }
    machineId = `${hostname()}/${boot}/${netns}`
  }
  return machineId
}

/** A socket file its mesh removed itself. */
export function forgetSocketFile(path: string): void {
  socketPaths.delete(path)
}
