/**
 * @module A weighted mixture of datasets (token caches): each training batch takes its rows from
 * the sources in proportion to weights that may change by stage, deterministically from (seed,
 * step), so a run resumes mid-mixture exactly.
 *
 * The rows of a stage are cut into blocks of `blockSize`. A block's count per source is a
 * systematic sample of the weights (a seeded offset `u`: source k gets
 * `⌊c_k·n + u⌋ − ⌊c_{k-1}·n + u⌋` rows, `c` the cumulative weights, `n` the block's rows), so every
 * block holds within one row of `w_k · n` of each source and the expectation is exact; its rows
 * are then put in a seeded order. The i-th row a source gives is its i-th training sequence in a
 * seeded order, reshuffled each epoch; a source that runs out is an error unless `repeat` says it
 * may start another epoch. Counts before a block are summed once and kept, so finding the rows of
 * any step (a resume at step 100,000 included) costs one pass over the blocks before it, then O(1).
 *
 * @example
 * const data = Dataset.mixture({ web: webCache, wiki: Dataset.fromDatakit(wikiCache, { evalFraction: 0.1 }) }, {
 *   weights: [{ untilStep: 1000, weights: { web: 0.9, wiki: 0.1 } }, { weights: { web: 0.7, wiki: 0.3 } }],
 * })
 */
import { LevanterError } from '../errors.js'
import { permutation, Rng, seedFor } from '../rng.js'
import type { Batch } from './batch.js'

/**
 * What a mixture reads of each source: a levanter `Dataset` has all of it (`Dataset.mixture` wraps a token
 * cache given as a source in one).
 */
export type MixtureSource = {
  sequences(seqLen: number): { train: number; eval: number }
  rows(rows: readonly number[], seqLen: number): Promise<Batch>
  evalBatch(i: number, batchSize: number, seqLen: number): Promise<Batch>
  readonly bytesPerToken: number | undefined
}

/** Weights by source name; they need not sum to 1 (they are normalized). */
export type MixtureWeights = Readonly<Record<string, number>>

/** One stage: these weights until `untilStep` (exclusive); the last stage has no `untilStep`. */
export type MixtureStage = { readonly untilStep?: number; readonly weights: MixtureWeights }

export type MixtureOptions = {
  /** One set of weights for the whole run, or stages in order. */
  readonly weights: MixtureWeights | readonly MixtureStage[]
  /** Rows per block of fixed composition. @default 1024 */
  readonly blockSize?: number
  /** Let a source that runs out of training sequences start another epoch (all, or by name). @default false */
  readonly repeat?: boolean | Readonly<Record<string, boolean>>
}

type Stage = { readonly untilStep: number; readonly cum: Float64Array }

/** A block's rows: which source each row comes from and its rank among that source's rows in the block. */
type Block = { readonly source: Uint8Array; readonly rank: Uint32Array; readonly counts: Uint32Array }

export class MixtureDataset {
  readonly names: readonly string[]
  readonly blockSize: number
  readonly #sources: readonly MixtureSource[]
  readonly #stages: readonly Stage[]
  readonly #repeat: readonly boolean[]
  /** Per (seed, batch size, stage): rows of each source before each block, filled as far as asked. */
  readonly #before = new Map<string, number[][]>()
  readonly #blocks = new Map<string, Block>()

  constructor(sources: Readonly<Record<string, MixtureSource>>, options: MixtureOptions) {
    this.names = Object.keys(sources)
    if (this.names.length === 0)
      throw new LevanterError('BAD_DATA', 'mixture: no sources; pass { name: dataset, … } with at least one')
    if (this.names.length > 255)
      throw new LevanterError('BAD_DATA', `mixture: ${this.names.length} sources; at most 255 are supported`)
    this.#sources = this.names.map((n) => sources[n]!)
    this.blockSize = options.blockSize ?? 1024
    if (!(Number.isInteger(this.blockSize) && this.blockSize >= 1))
      throw new LevanterError('BAD_CONFIG', `mixture: blockSize ${this.blockSize} must be a positive integer`)
    const raw = Array.isArray(options.weights)
      ? (options.weights as readonly MixtureStage[])
      : [{ weights: options.weights as MixtureWeights }]
    this.#stages = this.#checkStages(raw)
    const repeat = options.repeat ?? false
    if (typeof repeat === 'object')
      for (const n of Object.keys(repeat))
        if (!this.names.includes(n))
          throw new LevanterError('BAD_CONFIG', `mixture: repeat names "${n}", which is not a source (${this.#list()})`)
    this.#repeat = this.names.map((n) => (typeof repeat === 'boolean' ? repeat : repeat[n] === true))
  }

  #list(): string {
    return this.names.join(', ')
  }

  #checkStages(raw: readonly MixtureStage[]): Stage[] {
    if (raw.length === 0) throw new LevanterError('BAD_CONFIG', 'mixture: weights has no stage')
    let prev = 0
    return raw.map((stage, i) => {
      const where = raw.length > 1 ? `weights[${i}]` : 'weights'
      const last = i === raw.length - 1
      const until = stage.untilStep ?? (last ? Number.POSITIVE_INFINITY : Number.NaN)
      if (!last && !(Number.isInteger(until) && until > prev))
        throw new LevanterError(
          'BAD_CONFIG',
          `mixture: ${where}.untilStep ${stage.untilStep} must be an integer above ${prev} ` +
            '(stages in order; only the ' +
            'last may leave it out)',
        )
      if (last && stage.untilStep !== undefined && !(Number.isInteger(until) && until > prev))
        throw new LevanterError('BAD_CONFIG', `mixture: ${where}.untilStep ${stage.untilStep} must be above ${prev}`)
      prev = until
      const w = stage.weights ?? {}
      for (const n of Object.keys(w))
        if (!this.names.includes(n))
          throw new LevanterError(
            'BAD_CONFIG',
            `mixture: ${where} names "${n}", which is not a source (${this.#list()})`,
          )
      const values = this.names.map((n) => w[n] ?? 0)
      values.forEach((v, k) => {
        if (!(Number.isFinite(v) && v >= 0))
          throw new LevanterError(
            'BAD_CONFIG',
            `mixture: ${where}.${this.names[k]} is ${v}; a weight is a finite number ≥ 0`,
          )
      })
      const total = values.reduce((a, b) => a + b, 0)
      if (!(total > 0)) throw new LevanterError('BAD_CONFIG', `mixture: ${where} gives every source weight 0`)
      const cum = new Float64Array(values.length)
      let acc = 0
      values.forEach((v, k) => {
        acc += v / total
        cum[k] = acc
      })
      cum[values.length - 1] = 1
      return { untilStep: until, cum }
    })
  }

  /** The normalized weights of the stage that `step` is in. */
  weightsAt(step: number): Record<string, number> {
    const { cum } = this.#stages[this.#stageOf(step)]!
    return Object.fromEntries(this.names.map((n, k) => [n, cum[k]! - (k ? cum[k - 1]! : 0)]))
  }

  #stageOf(step: number): number {
    let i = 0
    while (step >= this.#stages[i]!.untilStep) i++
    return i
  }

  /** Rows of the stage before it starts, and its length in rows (Infinity for the last). */
  #stageRows(i: number, batchSize: number): { start: number; rows: number } {
    const start = i === 0 ? 0 : this.#stages[i - 1]!.untilStep * batchSize
    return { start, rows: this.#stages[i]!.untilStep * batchSize - start }
  }

  #block(seed: number, batchSize: number, stage: number, j: number): Block {
    const key = `${seed}:${batchSize}:${stage}:${j}`
    const hit = this.#blocks.get(key)
    if (hit) return hit
    const { rows } = this.#stageRows(stage, batchSize)
    const n = Math.min(this.blockSize, rows - j * this.blockSize)
    const K = this.names.length
    const { cum } = this.#stages[stage]!
    const u = new Rng(seedFor(seed, 'mixture-counts', stage, j)).next()
    const counts = new Uint32Array(K)
    let below = 0
    for (let k = 0; k < K; k++) {
      const upTo = k === K - 1 ? n : Math.min(n, Math.floor(cum[k]! * n + u))
      counts[k] = upTo - below
      below = upTo
    }
    const slots = new Uint8Array(n)
    for (let k = 0, at = 0; k < K; k++) slots.fill(k, at, (at += counts[k]!))
    const order = permutation(n, seedFor(seed, 'mixture-order', stage, j))
    const source = new Uint8Array(n)
    const rank = new Uint32Array(n)
    const seen = new Uint32Array(K)
    for (let o = 0; o < n; o++) {
      const k = slots[order[o]!]!
      source[o] = k
      rank[o] = seen[k]!++
    }
    if (this.#blocks.size >= 8) this.#blocks.delete(this.#blocks.keys().next().value!)
    const block = { source, rank, counts }
    this.#blocks.set(key, block)
    return block
  }

  /** Rows of each source taken before block `j` of `stage` (stages before it included). */
  #rowsBefore(seed: number, batchSize: number, stage: number, j: number): readonly number[] {
    const key = `${seed}:${batchSize}:${stage}`
    let memo: number[][] | undefined = this.#before.get(key)
    if (memo === undefined) {
      const start =
        stage === 0
          ? new Array<number>(this.names.length).fill(0)
          : [...this.#rowsBefore(seed, batchSize, stage - 1, this.#blocksIn(stage - 1, batchSize))]
      memo = [start]
      this.#before.set(key, memo)
    }
    while (memo.length <= j) {
      const b = memo.length - 1
      const { counts } = this.#block(seed, batchSize, stage, b)
      memo.push(memo[b]!.map((c, k) => c + counts[k]!))
    }
    return memo[j]!
  }

  #blocksIn(stage: number, batchSize: number): number {
    return Math.ceil(this.#stageRows(stage, batchSize).rows / this.blockSize)
  }

  /** Rows each source gave to steps [0, step): what a run that reached `step` consumed. */
  consumed(step: number, batchSize: number, seed: number): Record<string, number> {
    const rows = this.#locateAll(step * batchSize, batchSize, seed)
    return Object.fromEntries(this.names.map((n, k) => [n, rows[k]!]))
  }

  /** Rows of each source before global row `p`. */
  #locateAll(p: number, batchSize: number, seed: number): number[] {
    const stage = this.#stageOf(Math.floor(p / batchSize))
    const q = p - this.#stageRows(stage, batchSize).start
    const j = Math.floor(q / this.blockSize)
    const before = [...this.#rowsBefore(seed, batchSize, stage, j)]
    const o = q - j * this.blockSize
    if (o > 0) {
      const block = this.#block(seed, batchSize, stage, j)
      for (let r = 0; r < o; r++) before[block.source[r]!]!++
    }
    return before
  }

  /** The training batch of `step`: rows from the sources as the weights of its stage say. */
  async trainBatch(step: number, batchSize: number, seqLen: number, seed: number): Promise<Batch> {
    const bySource = this.names.map(() => ({ at: [] as number[], rows: [] as number[] }))
    // stages change at step boundaries: all of a step's rows are in one
    const stage = this.#stageOf(step)
    for (let r = 0; r < batchSize; r++) {
      const p = step * batchSize + r
      const q = p - this.#stageRows(stage, batchSize).start
      const j = Math.floor(q / this.blockSize)
      const o = q - j * this.blockSize
      const block = this.#block(seed, batchSize, stage, j)
      const k = block.source[o]!
      const nth = this.#rowsBefore(seed, batchSize, stage, j)[k]! + block.rank[o]!
      bySource[k]!.at.push(r)
      bySource[k]!.rows.push(this.#sequenceOf(k, nth, seqLen, seed, step))
    }
    const inputs = new Int32Array(batchSize * seqLen)
    const targets = new Int32Array(batchSize * seqLen)
    const mask = new Float32Array(batchSize * seqLen)
    for (let k = 0; k < this.names.length; k++) {
      const { at, rows } = bySource[k]!
      if (rows.length === 0) continue
      const part = await this.#sources[k]!.rows(rows, seqLen)
      at.forEach((r, i) => {
        const from = i * seqLen
        inputs.set(part.inputs.subarray(from, from + seqLen), r * seqLen)
        targets.set(part.targets.subarray(from, from + seqLen), r * seqLen)
        mask.set(part.mask.subarray(from, from + seqLen), r * seqLen)
      })
    }
    return { inputs, targets, mask, batchSize, seqLen }
  }

  readonly #perms = new Map<string, Uint32Array>()

  /** The training sequence that is source `k`'s `nth` row. */
  #sequenceOf(k: number, nth: number, seqLen: number, seed: number, step: number): number {
    const train = this.#sources[k]!.sequences(seqLen).train
    const epoch = Math.floor(nth / train)
    if (epoch > 0 && !this.#repeat[k])
      throw new LevanterError(
        'BAD_DATA',
        `mixture: source "${this.names[k]}" ran out at step ${step}: it has ${train} training sequences of ` +
          `${seqLen} tokens and the mixture asks for sequence ${nth + 1}; add data, lower its weight, or allow ` +
          `another epoch with repeat: { ${this.names[k]}: true }`,
      )
    const key = `${k}:${seed}:${epoch}:${train}`
    let perm = this.#perms.get(key)
    if (!perm) {
      if (this.#perms.size > 4 * this.names.length) this.#perms.clear()
      perm = permutation(train, seedFor(seed, 'mixture-source', this.names[k]!, epoch))
      this.#perms.set(key, perm)
    }
    return perm[nth % train]!
  }

  /** The sources, for evaluating each on its own held-out sequences. */
  evalSets(): { readonly name: string; readonly dataset: MixtureSource }[] {
    return this.names.map((name, k) => ({ name, dataset: this.#sources[k]! }))
  }

  /**
   * Held-out batch `i` of the mixture: rows from each source's held-out sequences in proportion to
   * the last stage's weights (a source with no held-out sequences gives none).
   */
  async evalBatch(i: number, batchSize: number, seqLen: number): Promise<Batch> {
    const last = this.#stages.at(-1)!.cum
    const usable = this.#sources.map((d) => d.sequences(seqLen).eval > 0)
    const w = this.names.map((_, k) => (usable[k] ? last[k]! - (k ? last[k - 1]! : 0) : 0))
    const total = w.reduce((a, b) => a + b, 0)
    if (!(total > 0))
      throw new LevanterError('BAD_DATA', 'mixture: no source has held-out sequences; set evalFraction > 0')
    const inputs = new Int32Array(batchSize * seqLen)
    const targets = new Int32Array(batchSize * seqLen)
    const mask = new Float32Array(batchSize * seqLen)
    let row = 0
    let acc = 0
    for (let k = 0; k < this.names.length; k++) {
      acc += w[k]! / total
      const n = (k === this.names.length - 1 ? batchSize : Math.min(batchSize, Math.floor(acc * batchSize + 0.5))) - row
      if (n <= 0) continue
      const part = await this.#sources[k]!.evalBatch(i, n, seqLen)
      inputs.set(part.inputs, row * seqLen)
      targets.set(part.targets, row * seqLen)
      mask.set(part.mask, row * seqLen)
      row += n
    }
    return { inputs, targets, mask, batchSize, seqLen }
  }

  /** Bytes per token of the mixture's held-out rows, when every source knows its own. */
  get bytesPerToken(): number | undefined {
    const last = this.#stages.at(-1)!.cum
    let sum = 0
    for (let k = 0; k < this.names.length; k++) {
      const bpt = this.#sources[k]!.bytesPerToken
      if (bpt === undefined) return undefined
      sum += (last[k]! - (k ? last[k - 1]! : 0)) * bpt
    }
    return sum
  }
}
