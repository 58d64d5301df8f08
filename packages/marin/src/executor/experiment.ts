/**
 * @module `Experiment` and `Config`: what an experiment script builds and
 * `export default`s. An Experiment is also a job source for iris's
 * `JobScheduler`: iterating it runs the executor and yields one job request
 * per step that must run, when its dependencies are done.
 */
import { fileURLToPath } from 'node:url'
import { dirname, resolve } from 'node:path'
import type { JobRequest } from '@marin/iris'
import { MarinError } from '../errors.js'
import type { Step } from './step.js'
import type { ExperimentRecord } from './executor.js'

/**
 * A bag of hyper-parameters. Put in a step's config (whole, or fields with `cfg.field('x')`),
 * every field counts toward the version.
 * @example
 * const cfg = new Config({ model: 'gpt2-small', optimizer: 'adamw', dataset: 'brown', batchSize: 128 })
 * const small = cfg.with({ batchSize: 32 })
 */
export class Config<T extends Record<string, unknown> = Record<string, unknown>> {
  readonly __marinConfig = true as const
  readonly values: Readonly<T>

  constructor(values: T) {
    if (typeof values !== 'object' || values === null || Array.isArray(values)) {
      throw new MarinError('BAD_CONFIG', 'new Config(values): values must be an object of named fields')
    }
    this.values = Object.freeze({ ...values })
  }

  /** A copy with some fields replaced. */
  with(overrides: Partial<T>): Config<T> {
    return new Config({ ...this.values, ...overrides } as T)
  }

  /** One field; throws BAD_CONFIG naming the known fields when it is missing. */
  get<K extends keyof T & string>(key: K): T[K] {
    if (!(key in this.values)) throw new MarinError('BAD_CONFIG', `config has no field "${key}"; known fields: ${Object.keys(this.values).join(', ')}`)
    return this.values[key]
  }

  toJSON(): Readonly<T> {
    return this.values
  }
}

export type ExperimentOptions<T extends Record<string, unknown> = Record<string, unknown>> = {
  /** Names the experiment and its records (`experiments/<name>/`): letters, digits, `. _ -`. */
  readonly name: string
  /** The steps to run (their dependencies come along), or a function building them from `config`. */
  readonly steps: readonly Step[] | ((config: Config<T>) => readonly Step[])
  readonly config?: Config<T>
  readonly description?: string
  /** The module that defines it, so that iris jobs can import it again. @default found from the call stack */
  readonly script?: string
  /**
   * Publish the report of every successful run, as `marin publish-report --source <the run> --target <target>` does:
   * a folder (relative to the working directory), a storage URL, or an http(s):// URL accepting PUT.
   * A report reads the run's record, which exists only once every step is done, so it follows the run instead of being a step.
   */
  readonly report?: { readonly target: string }
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/
const HERE = dirname(fileURLToPath(import.meta.url))

/** The first file on the call stack outside this package: the experiment script. */
function callerScript(): string | undefined {
  const stack = new Error().stack?.split('\n').slice(1) ?? []
  for (const line of stack) {
    const m = /\(?((?:file:\/\/)?\/[^():]+\.[cm]?[jt]sx?):\d+:\d+\)?\s*$/.exec(line)
    if (!m) continue
    const file = m[1]!.startsWith('file://') ? fileURLToPath(m[1]!) : m[1]!
    if (dirname(file) === HERE || file.includes('/node_modules/')) continue
    return file
  }
  return undefined
}

/** Set on globalThis (a count) while `loadExperiment` imports a script. */
export const LOADING = Symbol.for('marin.loadingScript')

/** Marks Experiment instances so that scripts loaded through another module instance are recognized. */
export const EXPERIMENT_MARK = Symbol.for('marin.experiment')

export class Experiment<T extends Record<string, unknown> = Record<string, unknown>> implements AsyncIterable<JobRequest> {
  readonly [EXPERIMENT_MARK] = true
  readonly name: string
  readonly config: Config<T> | undefined
  readonly description: string | undefined
  readonly report: { readonly target: string } | undefined
  /** Absolute path of the script that defines this experiment, if known (`loadExperiment` fills it in). */
  script: string | undefined
  private readonly stepsSource: ExperimentOptions<T>['steps']
  private built: readonly Step[] | undefined

  constructor(opts: ExperimentOptions<T>) {
    if (typeof opts?.name !== 'string' || !NAME.test(opts.name)) {
      throw new MarinError('BAD_CONFIG', `experiment name ${JSON.stringify(opts?.name)} is invalid; use 1-100 of letters, digits and ". _ -"`)
    }
    if (typeof opts.steps !== 'function' && !Array.isArray(opts.steps)) {
      throw new MarinError('BAD_CONFIG', `experiment "${opts.name}": steps must be an array of step(...) or a function (config) => steps`)
    }
    if (typeof opts.steps === 'function' && !opts.config) {
      throw new MarinError('BAD_CONFIG', `experiment "${opts.name}": steps is a function of the config, so pass config: new Config({...})`)
    }
    this.name = opts.name
    this.config = opts.config
    this.description = opts.description
    if (opts.report !== undefined && (typeof opts.report?.target !== 'string' || opts.report.target === '')) {
      throw new MarinError('BAD_CONFIG', `experiment "${opts.name}": report.target must be a folder or URL, e.g. { target: './site' }`)
    }
    this.report = opts.report
    this.stepsSource = opts.steps
    const script = opts.script ?? callerScript()
    this.script = script?.startsWith('file://') ? fileURLToPath(script) : script ? resolve(script) : undefined
  }

  /** The steps, built once. */
  get steps(): readonly Step[] {
    if (!this.built) {
      const src = this.stepsSource
      this.built = typeof src === 'function' ? src(this.config!) : src
    }
    return this.built
  }

  /** Runs the experiment; see `runExperiment` for the options. */
  async run(opts: import('./run-experiment.js').RunOptions = {}): Promise<ExperimentRecord> {
    const { runExperiment } = await import('./run-experiment.js')
    return runExperiment(this as unknown as Experiment, opts)
  }

  /**
   * Runs this experiment with `marin run`'s flags taken from `argv`; sets `process.exitCode`.
   * Does nothing while `marin run` or an iris job imports the script.
   * @example await experiment.main()
   */
  async main(argv: readonly string[] = process.argv.slice(2)): Promise<number> {
    if (process.env.MARIN_STEP_CHILD === '1' || ((globalThis as Record<symbol, unknown>)[LOADING] as number) > 0) return 0
    const { runMain } = await import('../cli/run.js')
    return runMain(this as unknown as Experiment, argv)
  }

  /** The job requests of the steps that must run, each yielded once its dependencies are done (for `JobScheduler.submit`). */
  [Symbol.asyncIterator](): AsyncIterator<JobRequest> {
    let inner: AsyncIterator<JobRequest> | undefined
    const start = async () => {
      const { experimentJobs } = await import('./experiment-jobs.js')
      inner ??= experimentJobs(this as unknown as Experiment)
      return inner
    }
    return {
      next: async () => (await start()).next(),
      return: async (v?: unknown) => ((await start()).return?.(v) ?? { done: true, value: undefined }),
    }
  }
}

export function isExperiment(x: unknown): x is Experiment {
  return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[EXPERIMENT_MARK] === true
}

/**
 * Runs `experiment.main()` when the calling module is the program's entry point
 * (`tsx experiments/x.ts --dry-run`), and not when `marin run` or an iris job imports it.
 * Resolves with the exit code when it ran (0: every step done), undefined when it did not.
 * @example
 * export default experiment
 * await runIfMain(import.meta.url, experiment)
 */
export async function runIfMain(importMetaUrl: string, experiment: { main(): Promise<number> }): Promise<number | undefined> {
  const entry = process.argv[1]
  if (!entry || process.env.MARIN_STEP_CHILD === '1') return undefined
  const self = fileURLToPath(importMetaUrl)
  const strip = (p: string) => p.replace(/\.[cm]?[jt]sx?$/, '')
  if (resolve(entry) !== self && strip(resolve(entry)) !== strip(self)) return undefined
  return experiment.main()
}
