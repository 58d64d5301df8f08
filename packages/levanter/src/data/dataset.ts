/** @module Dataset: fixed-length training sequences over a TokenSource, a held-out split, and deterministic batches
 * from (seed, step). */
import { LevanterError } from '../errors.js'
import { permutation, seedFor } from '../rng.js'
import type { Batch } from './batch.js'
import { MixtureDataset, type MixtureOptions } from './mixture.js'
import { InMemoryTokenSource } from './token-source.js'
import type { TokenSource } from './token-source.js'

export type DatasetOptions = {
  /** Fraction of sequences (taken from the end) held out for evaluation. @default 0.05 */
  readonly evalFraction?: number
  /** Targets equal to this id (padding) are not trained on. @default none */
  readonly padId?: number
  /** Positions whose input is this id (end of document) do not predict across the boundary. @default none */
  readonly eosId?: number
}

/** Sequences of `seqLen + 1` tokens at stride `seqLen` from a token stream. */
export class Dataset {
  readonly evalFraction: number

  constructor(
    readonly source: TokenSource,
    readonly options: DatasetOptions = {},
  ) {
    const src = source as Partial<TokenSource> | string | undefined
    if (typeof src !== 'object' || src === null || typeof src.read !== 'function' || typeof src.numTokens !== 'number')
      throw new LevanterError(
        'BAD_DATA',
        `dataset: the source is ${typeof src === 'string' ? `the string "${src}"` : 'not a token source'}; ` +
          "levanter's Dataset.fromDatakit takes an opened token cache (datakit's TokenCache.open(...)), anything " +
          "with numTokens and read(start, length); datakit's Dataset.fromDatakit(name) reads text records instead",
      )
    this.evalFraction = options.evalFraction ?? 0.05
    if (!(this.evalFraction >= 0 && this.evalFraction < 1)) {
      throw new LevanterError('BAD_DATA', `dataset: evalFraction ${this.evalFraction} must be in [0, 1)`)
    }
  }

  /** A dataset over a datakit token cache (anything implementing {@link TokenSource}). */
  static fromDatakit(cache: TokenSource, options?: DatasetOptions): Dataset {
    return new Dataset(cache, options)
  }

  /**
   * A weighted mixture of datasets: each batch takes rows from the sources in proportion to the
   * weights (which may change by stage), deterministically from (seed, step); see `mixture.ts`.
   * A source is a levanter `Dataset` or an opened token cache (what {@link Dataset.fromDatakit} takes),
   * which is wrapped with `options.sourceOptions`.
   * @example Dataset.mixture({ web: webCache, wiki: wikiCache }, { weights: { web: 0.7, wiki: 0.3 } })
   */
  static mixture(
    sources: Readonly<Record<string, Dataset | TokenSource>>,
    options: MixtureOptions & {
      /** How a token cache given as a source is read (held-out fraction, padding and end-of-document ids). */
      readonly sourceOptions?: DatasetOptions
    },
  ): MixtureDataset {
    const { sourceOptions, ...mixOptions } = options
    const datasets = Object.fromEntries(
      Object.entries(sources).map(([name, d]) => [name, Dataset.#component(name, d, sourceOptions)]),
    )
    return new MixtureDataset(datasets, mixOptions)
  }

  static #component(name: string, d: unknown, options: DatasetOptions | undefined): Dataset {
    if (d instanceof Dataset) return d
    const src = d as Partial<TokenSource> | null | undefined
    if (typeof src === 'object' && src !== null && typeof src.read === 'function' && typeof src.numTokens === 'number')
      return new Dataset(src as TokenSource, options)
    const what =
      typeof d === 'string'
        ? `the string "${d}"`
        : d instanceof MixtureDataset
          ? 'a mixture (mixtures do not nest; list its sources here instead)'
          : d === null || d === undefined
            ? String(d)
            : 'neither a levanter Dataset nor a token source'
    throw new LevanterError(
      'BAD_DATA',
      `mixture: source "${name}" is ${what}; pass a levanter Dataset or an opened token cache ` +
        "(datakit's TokenCache.open(...), anything with numTokens and read(start, length))",
    )
  }

  /** A dataset over ids already in memory. */
  static fromTokens(
    tokens: Uint16Array | Uint32Array | Int32Array | readonly number[],
    options?: DatasetOptions & { numBytes?: number },
  ): Dataset {
    return new Dataset(new InMemoryTokenSource(tokens, options?.numBytes), options)
  }

  /** Bytes of text per token, when the source knows its byte count. */
  get bytesPerToken(): number | undefined {
    return this.source.numBytes ? this.source.numBytes / this.source.numTokens : undefined
  }

  sequences(seqLen: number): { train: number; eval: number } {
    const n = Math.floor((this.source.numTokens - 1) / seqLen)
    const ev = Math.floor(n * this.evalFraction)
    if (n - ev < 1)
      throw new LevanterError(
        'BAD_DATA',
        `dataset: ${this.source.numTokens} tokens make no training ` +
          `sequence of length ${seqLen}; add data or shorten seqLen`,
      )
    return { train: n - ev, eval: ev }
  }

  readonly #perms = new Map<string, Uint32Array>()

  /** The training batch of `step`: the same (seed, step) always gives the same rows, epoch after epoch reshuffled. */
  async trainBatch(step: number, batchSize: number, seqLen: number, seed: number): Promise<Batch> {
    const { train } = this.sequences(seqLen)
    const rows: number[] = []
    for (let j = 0; j < batchSize; j++) {
      const p = step * batchSize + j,
        epoch = Math.floor(p / train)
      const key = `${seed}:${epoch}:${train}`
      let perm = this.#perms.get(key)
      if (!perm) {
        if (this.#perms.size > 4) this.#perms.clear()
        perm = permutation(train, seedFor(seed, 'epoch', epoch))
        this.#perms.set(key, perm)
      }
      rows.push(perm[p % train]!)
    }
    return this.rows(rows, seqLen)
  }

  /** Held-out batch `i` (sequential, wraps around). */
  async evalBatch(i: number, batchSize: number, seqLen: number): Promise<Batch> {
    const { train, eval: ev } = this.sequences(seqLen)
    if (ev === 0)
      throw new LevanterError('BAD_DATA', 'dataset: no held-out sequences; set evalFraction > 0 or disable evaluation')
    return this.rows(
      Array.from({ length: batchSize }, (_, j) => train + ((i * batchSize + j) % ev)),
      seqLen,
    )
  }

  async rows(rows: readonly number[], seqLen: number): Promise<Batch> {
    const B = rows.length,
      T = seqLen
    const inputs = new Int32Array(B * T),
      targets = new Int32Array(B * T),
      mask = new Float32Array(B * T)
    const { padId, eosId } = this.options
    for (let r = 0; r < B; r++) {
      const toks = await this.source.read(rows[r]! * T, T + 1)
      for (let t = 0; t < T; t++) {
        const x = toks[t]!,
          y = toks[t + 1]!
        inputs[r * T + t] = x
        targets[r * T + t] = y
        mask[r * T + t] = y === padId || x === eosId ? 0 : 1
      }
    }
    return { inputs, targets, mask, batchSize: B, seqLen: T }
  }
}
