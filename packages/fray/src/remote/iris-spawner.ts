/**
 * @module Hosts as iris jobs: one job with one task per actor, running the actor host command.
 * Its end (from iris's long-poll wait) is the host's exit; a task killed by a signal is reported
 * by iris as exit code 128+n with the signal's name, which is read back into `signal`.
 */
import type { IrisClient, JobStatus } from '@marin/iris'
import { logger } from '@marin/rigging'
import { memoryBytes, type Resources } from '../resources.js'
import { hostCommand, type HostExit, type SpawnedHost, type Spawner } from './spawner.js'

const log = logger('fray')

/** Iris job names allow letters, digits, `.`, `_`, `-` (at most 100). */
export function irisJobName(name: string): string {
  return `fray-${name}`.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 100)
}

/** What the job's final status says about how its one task ended. */
export function exitOf(job: JobStatus): HostExit {
  const task = job.tasks[0]
  const error = task?.error ?? job.error
  const code = task?.exitCode ?? job.exitCode ?? null
  const sig = error ? /signal (SIG[A-Z0-9]+)/.exec(error)?.[1] : undefined
  return { code: sig ? null : code, signal: sig ?? null, ...(error ? { error } : {}) }
}

export type IrisSpawnerOptions = {
  /** Extra environment for every host (e.g. where hosts should listen). */
  env?: Record<string, string>
}

/** `iris` may still be starting (a cluster the client starts itself): each call waits for it. */
export function irisSpawner(iris: IrisClient | Promise<IrisClient>, opts: IrisSpawnerOptions = {}): Spawner {
  return {
    spawn(name: string, env: Record<string, string>, res: Resources): SpawnedHost {
      const client = Promise.resolve(iris)
      const submitted = client.then((c) =>
        c.submit({
          name: irisJobName(name),
          command: hostCommand(res.cpu),
          env: { ...opts.env, ...env },
          resources: { cpu: res.cpu, memory: memoryBytes(res.memory), gpu: res.gpu },
          replicas: 1,
          // Restarts are fray's (maxRestarts), so that each one is a fresh registration.
          maxRetriesFailure: 0,
          maxRetriesWorker: 0,
        }),
      )
      const exited: Promise<HostExit> = submitted.then(
        async (jobId) => exitOf(await (await client).wait(jobId)),
        (err: Error) => ({ code: null, signal: null, error: `iris refused the job: ${err.message}` }),
      )
      return {
        exited,
        kill: () => {
          void submitted
            .then(async (jobId) => (await client).kill(jobId))
            .catch((err: unknown) => log.warn({ err, actor: name }, 'could not kill actor job'))
        },
      }
    },
  }
}
