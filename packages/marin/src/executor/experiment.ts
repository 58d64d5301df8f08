/**
 * @module `Experiment` and `Config`: what an experiment script builds and
 * `export default`s. An Experiment is data (name, steps, config, description);
 * running it is the executor's `runExperiment`, which `experiment.run()` and
 * `experiment.main()` call.
 */
import { fileURLToPath } from 'node:url'
import { dirname, resolve } from 'node:path'
import { MarinError } from '../errors.js'
import type { Step } from './step.js'
import type { ExperimentRecord } from './executor.js'
import { runMain } from './main.js'
import { runExperiment, type RunOptions } from './run-experiment.js'
import type { JobHandle, JobScheduler, JobSource } from '@marin/iris'
// its own module: an experiment script that imports this loads nothing else of iris
import { SUBMIT_TO } from '@marin/iris/submit-to'

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
    if (!(key in this.values))
      throw new MarinError(
        'BAD_CONFIG',
        `config has no field "${key}"; known fields: ${Object.keys(this.values).join(', ')}`,
      )
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
   * A report reads the run's record, which exists only once every step is done, so it follows the run instead of being
   * a step. With `docs` (a folder `pnpm run docs` built), the site holds the docs too and its pages link them.
   */
  readonly report?: { readonly target: string; readonly docs?: string }
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

/** Marks Experiment instances so that scripts loaded through another module instance are recognized. */
export const EXPERIMENT_MARK = Symbol.for('marin.experiment')

export class Experiment<T extends Record<string, unknown> = Record<string, unknown>> {
  readonly [EXPERIMENT_MARK] = true
  readonly name: string
  readonly config: Config<T> | undefined
  readonly description: string | undefined
  readonly report: { readonly target: string; readonly docs?: string } | undefined
  /** Absolute path of the script that defines this experiment, if known (`loadExperiment` fills it in). */
  script: string | undefined
  private readonly stepsSource: ExperimentOptions<T>['steps']
  private built: readonly Step[] | undefined

  constructor(opts: ExperimentOptions<T>) {
    if (typeof opts?.name !== 'string' || !NAME.test(opts.name)) {
      throw new MarinError(
        'BAD_CONFIG',
        `experiment name ${JSON.stringify(opts?.name)} is invalid; use 1-100 of letters, digits and ". _ -"`,
      )
    }
    if (typeof opts.steps !== 'function' && !Array.isArray(opts.steps)) {
      throw new MarinError(
        'BAD_CONFIG',
        `experiment "${opts.name}": steps must be an array of step(...) or a function (config) => steps`,
      )
    }
    if (typeof opts.steps === 'function' && !opts.config) {
      throw new MarinError(
        'BAD_CONFIG',
        `experiment "${opts.name}": steps is a function of the config, so pass config: new Config({...})`,
      )
    }
    this.name = opts.name
    this.config = opts.config
    this.description = opts.description
    if (opts.report !== undefined && (typeof opts.report?.target !== 'string' || opts.report.target === '')) {
      throw new MarinError(
        'BAD_CONFIG',
        `experiment "${opts.name}": report.target must be a folder or URL, e.g. { target: './site' }`,
      )
    }
    if (opts.report?.docs !== undefined && (typeof opts.report.docs !== 'string' || opts.report.docs === '')) {
      throw new MarinError(
        'BAD_CONFIG',
        `experiment "${opts.name}": report.docs must be the folder \`pnpm run docs\` built, e.g. 'site-docs'`,
      )
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

  /** Runs the experiment: `runExperiment(this, opts)`. */
  run(opts: RunOptions = {}): Promise<ExperimentRecord> {
    return runExperiment(this as unknown as Experiment, opts)
  }

  /**
   * What `scheduler.submit(experiment)` calls: runs the steps as that scheduler's jobs, each once its
   * dependencies are done (`runExperiment(this, { scheduler })`), and resolves with the handles of the
   * jobs it ran; a run that failed rejects, naming the steps. For the run's record, call runExperiment.
   * @example const jobs = await new JobScheduler({ cluster: 'local' }).submit(experiment)
   */
  async [SUBMIT_TO](scheduler: JobScheduler): Promise<JobHandle[]> {
    const handles: JobHandle[] = []
    const recording = {
      submit: async (src: JobSource) => {
        const h = await scheduler.submit(src)
        handles.push(...h)
        return h
      },
    }
    const record = await runExperiment(this as unknown as Experiment, { scheduler: recording })
    if (record.status !== 'SUCCESS') {
      const failed = record.steps.filter((s) => s.status === 'FAILED' || s.status === 'DEP_FAILED')
      throw new MarinError(
        'STEP_FAILED',
        `experiment "${this.name}" run ${record.run}: ${failed.map((s) => `${s.name} ${s.status}`).join(', ')}; ` +
          `see the steps' logs under ${record.prefix}`,
      )
    }
    return handles
  }

  /**
   * Runs this experiment with `marin run`'s flags taken from `argv` (`runMain(this, argv)`);
   * sets `process.exitCode` and resolves with the run's record, or undefined when nothing ran.
   * Does nothing while `marin run` or an iris job imports the script.
   * @example await experiment.main()
   */
  main(argv: readonly string[] = process.argv.slice(2)): Promise<ExperimentRecord | undefined> {
    return runMain(this as unknown as Experiment, argv)
  }
}

export function isExperiment(x: unknown): x is Experiment {
  return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[EXPERIMENT_MARK] === true
}
