/**
 * @module Where a hosted actor's process comes from: a local child process, or an iris task.
 * Either way the process runs `host-main.ts` and finds the driver through its environment.
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { actorNodeArgs } from '../internal/node-args.js'
import type { Resources } from '../resources.js'

/** How a host ended; `error` is the backend's explanation when it has one. */
export type HostExit = { code: number | null; signal: string | null; error?: string }

/** One started host process. */
export type SpawnedHost = {
  /** Resolves when the process is gone, with how it ended (as far as the backend knows). */
  readonly exited: Promise<HostExit>
  kill(signal?: NodeJS.Signals): void
}

export type Spawner = {
  spawn(name: string, env: Record<string, string>, resources: Resources): SpawnedHost
}

const here = import.meta.url

/** The command that runs an actor host holding `cores` (node flags: internal/node-args.ts). */
export function hostCommand(cores: number): string[] {
  const main = fileURLToPath(new URL(here.endsWith('.ts') ? './host-main.ts' : './host-main.js', here))
  return [process.execPath, ...actorNodeArgs(cores), main]
}

/** Hosts as child processes of the driver. */
export const localSpawner: Spawner = {
  spawn(_name, env, res) {
    const [cmd, ...args] = hostCommand(res.cpu)
    const child = spawn(cmd!, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit'] })
    child.unref()
    const exited = new Promise<HostExit>((r) => child.once('exit', (code, signal) => r({ code, signal })))
    return { exited, kill: (signal = 'SIGKILL') => void child.kill(signal) }
  },
}
