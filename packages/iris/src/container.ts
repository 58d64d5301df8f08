/**
 * @module Container support: whether a docker engine answers, and the `docker run`
 * command line for a task. A worker without an answering engine refuses image jobs;
 * it never runs them without their image.
 */
import { execFile } from 'node:child_process'

export type DockerProbe = { readonly available: boolean; readonly reason?: string }

/**
 * Asks the docker engine for its version. `docker --version` only proves the client
 * is installed, so this calls `docker info`, which needs the engine.
 */
export function probeDocker(opts: { binary?: string; timeoutMs?: number } = {}): Promise<DockerProbe> {
  const binary = opts.binary ?? 'docker'
  return new Promise((resolve) => {
    execFile(
      binary,
      ['info', '--format', '{{.ServerVersion}}'],
      { timeout: opts.timeoutMs ?? 5000 },
      (err, stdout, stderr) => {
        if (!err && stdout.trim() !== '') return resolve({ available: true })
        const code = (err as NodeJS.ErrnoException | null)?.code
        if (code === 'ENOENT') return resolve({ available: false, reason: `no "${binary}" command on this worker` })
        const detail =
          (stderr || stdout || String(err?.message ?? ''))
            .trim()
            .split('\n')
            .find((l) => l.trim() !== '') ?? 'no answer'
        resolve({ available: false, reason: `docker engine did not answer "${binary} info": ${detail.slice(0, 200)}` })
      },
    )
  })
}

/** The argv that runs `command` in `image`, with the task directory mounted as the working directory. */
export function dockerRunArgs(opts: {
  binary?: string
  image: string
  name: string
  workDir: string
  env: Record<string, string>
  command: readonly string[]
  /** Host GPU indices the task may use. */
  gpus?: readonly number[]
  /** Variables passed by name only (`-e NAME`): docker reads their values from its own environment, so they stay out of
   * the argv that `ps` shows. */
  byName?: ReadonlySet<string>
}): string[] {
  const args = [
    opts.binary ?? 'docker',
    'run',
    '--rm',
    '--init',
    '--name',
    opts.name,
    '-v',
    `${opts.workDir}:/workspace`,
    '-w',
    '/workspace',
  ]
  // The controller address is loopback-relative on the host; share the host network so it still resolves.
  args.push('--network', 'host')
  if (opts.gpus && opts.gpus.length > 0) args.push('--gpus', `"device=${opts.gpus.join(',')}"`)
  for (const [k, v] of Object.entries(opts.env)) args.push('-e', opts.byName?.has(k) ? k : `${k}=${v}`)
  args.push(opts.image, ...opts.command)
  return args
}
