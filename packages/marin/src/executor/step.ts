/**
 * @module Steps: `step({ name, config, fn })` declares one unit of work whose
 * output lives at a content-addressed path; `other.output('sub/path')` in a
 * config is a dependency on another step's output.
 */
import { MarinError } from '../errors.js'
import type { Logger } from '@marin/rigging'
import type { Versioned } from './versioned.js'
import type { ArtifactRef } from './artifacts.js'

const OUTPUT_REF = Symbol.for('marin.outputRef')

/** A reference to (a path inside) another step's output; resolved to a path before the step runs. */
export class OutputRef {
  readonly [OUTPUT_REF] = true
  constructor(
    readonly step: Step,
    /** Path inside the output, '' for the output itself. */
    readonly subPath: string,
  ) {}
  toJSON(): string {
    return `<output of ${this.step.name}${this.subPath ? `/${this.subPath}` : ''}>`
  }
}

/**
 * A reference to an artifact another step committed (listed in its `artifacts.json`, main one
 * first); the step function receives it as an `ArtifactRef`. It counts toward the version as
 * `output('artifacts.json')` does.
 */
export class ArtifactInput extends OutputRef {
  constructor(
    step: Step,
    /** Which of the listed artifacts: 0 is the main one. */
    readonly artifactIndex: number,
  ) {
    super(step, 'artifacts.json')
  }
  override toJSON(): string {
    return `<artifact ${this.artifactIndex} of ${this.step.name}>`
  }
}

export const isArtifactInput = (x: unknown): x is ArtifactInput => x instanceof ArtifactInput

export function isOutputRef(x: unknown): x is OutputRef {
  return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[OUTPUT_REF] === true
}

/** A config as the step function sees it: versioned values unwrapped, output references as paths, artifact inputs as
 * references. */
export type Resolved<C> =
  C extends Versioned<infer T>
    ? Resolved<T>
    : C extends ArtifactInput
      ? ArtifactRef
      : C extends OutputRef
        ? string
        : C extends { readonly values: infer V; readonly __marinConfig: true }
          ? Resolved<V>
          : C extends readonly (infer E)[]
            ? Resolved<E>[]
            : C extends Record<string, unknown>
              ? { [K in keyof C]: Resolved<C[K]> }
              : C

/** What a step function gets besides its config. */
export type StepContext = {
  /**
   * Where the step writes its output: a local directory for file:// prefixes, else a URL. It is
   * a staging folder of this attempt (`<step>/.staging/<attempt>/<name_hash8>`, named like the
   * step folder), moved into the step folder when the function returns or throws, if the step's
   * lease is still held; dependents get the step folder's path.
   */
  readonly outputPath: string
  /** The Marin prefix the step runs under (a local directory for file:// prefixes, else a URL); finestore lives at
   * `<prefix>/store`. */
  readonly prefix: string
  /** A logger whose lines also go to the step's `logs/` folder. */
  readonly log: Logger
  /** Aborted when the step's lease is lost (someone else took the step over). */
  readonly signal: AbortSignal
}

export type StepFn<C> = (config: Resolved<C>, ctx: StepContext) => unknown | Promise<unknown>

export type StepOptions<C> = {
  /** Names the step and its output folder; letters, digits, `. _ - /`. */
  readonly name: string
  /** Plain data; `versioned(...)` fields and `other.output()` references make the version. A function is called when
   * the experiment is planned. */
  readonly config: C | (() => C)
  readonly fn: StepFn<C>
  /** Resources of the iris job that runs it. @default 'cpu=1,memory=2G,gpu=0' */
  readonly resources?: string
  /** Free-form description shown by `marin ls`. */
  readonly description?: string
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*(\/[A-Za-z0-9][A-Za-z0-9._-]*)*$/

/**
 * One step of an experiment. Create with `step()`.
 * `Step` alone means a step of any config (C is invariant: it is read and passed to `fn`).
 */
export class Step<C = any> {
  readonly name: string
  readonly fn: StepFn<C>
  readonly resources: string | undefined
  readonly description: string | undefined
  private readonly configSource: C | (() => C)
  private configValue: { v: C } | undefined

  constructor(opts: StepOptions<C>) {
    if (typeof opts?.name !== 'string' || !NAME.test(opts.name) || opts.name.length > 200) {
      throw new MarinError(
        'BAD_STEP',
        `step name ${JSON.stringify(opts?.name)} is invalid; use ` +
          `letters, digits, ". _ -" and "/" between parts (at most 200 characters)`,
      )
    }
    if (typeof opts.fn !== 'function')
      throw new MarinError(
        'BAD_STEP',
        `step "${opts.name}": fn must be a function (config, { outputPath, log }) => ...`,
      )
    this.name = opts.name
    this.fn = opts.fn
    this.resources = opts.resources
    this.description = opts.description
    this.configSource = opts.config
  }

  /** The config, calling a config function once. */
  get config(): C {
    if (!this.configValue) {
      const src = this.configSource
      this.configValue = { v: typeof src === 'function' ? (src as () => C)() : src }
    }
    return this.configValue.v
  }

  /**
   * A dependency on this step's output (or a path inside it), to put in another step's config.
   * @example step({ name: 'train', config: { data: tokenize.output('cache') }, fn })
   */
  output(subPath = ''): OutputRef {
    const clean = subPath.replace(/^\/+|\/+$/g, '')
    if (clean.split('/').some((p) => p === '..'))
      throw new MarinError(
        'BAD_STEP',
        `step "${this.name}": output("${subPath}") may not contain ".."; name a path inside the output`,
      )
    return new OutputRef(this as unknown as Step, clean)
  }

  /**
   * A dependency on an artifact this step commits and lists in its `artifacts.json` (0, the
   * default, is the main one); the dependent step's function receives it as an `ArtifactRef`.
   * @example dedupStep's config: { input: ingest.artifact() } → c.input = { kind: 'artifact', name: 'datasets/brown',
   * version: 2 }
   */
  artifact(index = 0): ArtifactInput {
    if (!Number.isInteger(index) || index < 0)
      throw new MarinError(
        'BAD_STEP',
        `step "${this.name}": artifact(${index}): give the position in ` +
          `its artifacts.json list, 0 for the main one`,
      )
    return new ArtifactInput(this as unknown as Step, index)
  }
}

/**
 * Declares a step.
 * @example
 * const tokenize = step({ name: 'tokenize', config: { vocab: versioned(512), data: ingest.output() }, fn: async (cfg, {
 * outputPath }) => { ... } })
 */
export function step<C>(opts: StepOptions<C>): Step<C> {
  return new Step(opts)
}
