/**
 * @module The Unix socket files of this process's mesh members: removed at exit and on SIGTERM,
 * and the identity of this machine, so that a socket path is only dialed where it exists.
 */
import { readFileSync, rmSync } from 'node:fs'
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
/** Identifies this machine (and boot), so that a Unix socket path is only used where it exists. */
export function thisMachine(): string {
  if (machineId === undefined) {
    let boot = ''
    try {
      boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
    } catch {
      /* not Linux: the host name alone */
    }
    machineId = `${hostname()}/${boot}`
  }
  return machineId
}

/** A socket file its mesh removed itself. */
export function forgetSocketFile(path: string): void {
  socketPaths.delete(path)
}
