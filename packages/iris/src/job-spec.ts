/** @module What a job asks for: the user-facing request (`JobRequest`) and the resolved spec the controller stores. */
import { z } from 'zod'
import { IrisError } from './errors.js'
import { DEFAULT_RESOURCES, parseResources, type Resources } from './resources.js'
import { PRIORITIES } from './states.js'
import { parseMount, type Mount } from './mount-spec.js'

export const ResourcesSchema = z.strictObject({
  cpu: z.number().positive(),
  memory: z.number().int().nonnegative(),
  gpu: z.number().int().nonnegative(),
})

export const MountSchema = z.strictObject({
  artifact: z.string().min(1),
  version: z.string().min(1).optional(),
  path: z.string().min(1),
})

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/
const SECRET_SPEC = /^(env:[A-Za-z_][A-Za-z0-9_]*|file:.+)$/
/** Why a secret spec was refused; a literal value would travel and be stored in plain text. */
export const SECRET_SPEC_MESSAGE =
  'a secret is env:NAME or file:PATH (resolved on the worker); a literal value would be stored in plain text'

/** The resolved job spec: what the controller stores and what the wire carries. */
export const JobSpecSchema = z.strictObject({
  name: z.string().regex(NAME, 'a job name is 1-100 of A-Z a-z 0-9 . _ - and starts with a letter or digit'),
  command: z.array(z.string()).min(1, 'command must have at least the program to run'),
  resources: ResourcesSchema,
  replicas: z.number().int().min(1).max(10_000),
  image: z.string().min(1).optional(),
  env: z.record(z.string().regex(ENV_KEY, 'environment keys are [A-Za-z_][A-Za-z0-9_]*'), z.string()),
  priority: z.enum(PRIORITIES),
  mounts: z.array(MountSchema),
  maxRetriesFailure: z.number().int().min(0).max(1000),
  maxRetriesWorker: z.number().int().min(0).max(1000),
  /** Environment variables resolved on the worker: name → `env:VAR` or `file:PATH`. Only the spec travels. */
  secrets: z
    .record(
      z.string().regex(ENV_KEY, 'secret names are environment keys, [A-Za-z_][A-Za-z0-9_]*'),
      z.string().regex(SECRET_SPEC, SECRET_SPEC_MESSAGE),
    )
    .optional(),
  /** The job's tasks may submit child jobs with their job token. */
  allowChildren: z.boolean().optional(),
  /** The job whose task submitted this one; set by the controller. */
  parent: z.string().min(1).optional(),
  /** A warm runner (a program built on `serveWarmTasks`) that runs `command` as a call; see `warm-runner.ts`. */
  runner: z
    .strictObject({ command: z.array(z.string()).min(1, 'runner.command must name the runner program') })
    .optional(),
})
export type JobSpec = z.infer<typeof JobSpecSchema>

/** What a user writes to submit a job; everything but `name` and `command` has a default. */
export type JobRequest = {
  name: string
  command: readonly string[]
  /** `'cpu=1,memory=2G,gpu=0'` or an object; missing keys take the default. @default cpu=1,memory=1Gi,gpu=0 */
  resources?: string | Partial<Resources>
  /** Number of tasks (replicas) of the job. @default 1 */
  replicas?: number
  /** Container image; runs only on workers where a docker engine answers. */
  image?: string
  /** Plain settings for the task. Their values stay on the controller and workers: status and lists show names only. */
  env?: Record<string, string>
  /** Secrets for the task, as `NAME: 'env:VAR'` or `NAME: 'file:PATH'` specs the worker resolves (rigging's
   * SecretStore); values never reach the controller. */
  secrets?: Record<string, string>
  /** Let the job's tasks submit child jobs with their own job token. @default false */
  allowChildren?: boolean
  /** @default 'batch' */
  priority?: (typeof PRIORITIES)[number]
  /** `ARTIFACT[@VERSION]:path` strings or parsed mounts. */
  mounts?: ReadonlyArray<string | Mount>
  /** Retries after a task exits non-zero. @default 0 */
  maxRetriesFailure?: number
  /** Retries after a task's worker is lost. @default 3 */
  maxRetriesWorker?: number
  /**
   * Run the tasks as calls into a process the worker keeps between tasks: `command` is a program built on
   * `serveWarmTasks` (`@marin/iris/warm-task`) that can run the job's `command` without starting it. Tasks
   * share a runner only with tasks of the same submitter, runner and environment (see OPS.md); a worker
   * without warm runners runs `command` itself, so it must also work as a program of its own. Not with `image`.
   */
  runner?: { readonly command: readonly string[] }
}

/** Resolves defaults and validates a request; throws `IrisError('BAD_REQUEST')` naming the field. */
export function resolveJobRequest(req: JobRequest): JobSpec {
  const resources =
    typeof req.resources === 'string'
      ? parseResources(req.resources)
      : { ...DEFAULT_RESOURCES, ...(req.resources ?? {}) }
  const candidate = {
    name: req.name,
    command: [...req.command],
    resources,
    replicas: req.replicas ?? 1,
    ...(req.image !== undefined ? { image: req.image } : {}),
    env: { ...(req.env ?? {}) },
    priority: req.priority ?? 'batch',
    mounts: (req.mounts ?? []).map((m) => (typeof m === 'string' ? parseMount(m) : m)),
    maxRetriesFailure: req.maxRetriesFailure ?? 0,
    maxRetriesWorker: req.maxRetriesWorker ?? 3,
    ...(req.secrets && Object.keys(req.secrets).length > 0 ? { secrets: { ...req.secrets } } : {}),
    ...(req.allowChildren ? { allowChildren: true } : {}),
    ...(req.runner ? { runner: { command: [...req.runner.command] } } : {}),
    ...((req as Partial<JobSpec>).parent !== undefined ? { parent: (req as Partial<JobSpec>).parent } : {}),
  }
  return parseJobSpec(candidate)
}

/** Validates a resolved spec (from the wire or the state store). */
export function parseJobSpec(value: unknown): JobSpec {
  const r = JobSpecSchema.safeParse(value)
  if (r.success && r.data.runner && r.data.image !== undefined)
    throw new IrisError(
      'BAD_REQUEST',
      'job request: field "runner": a warm runner runs on the worker\'s host, so a job with an image cannot ' +
        'have one; drop runner or image',
    )
  if (!r.success) {
    const issue = r.error.issues[0]!
    const field = issue.path.join('.') || '(request)'
    throw new IrisError('BAD_REQUEST', `job request: field "${field}": ${issue.message}; fix it and submit again`)
  }
  return r.data
}
