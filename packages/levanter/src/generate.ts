/**
 * @module Generation: incremental decoding on the batched decoder (models/decode.ts, one row; the
 * code a continuous-batching server runs) or full re-forward (for comparison),
 * temperature / top-k / top-p sampling from a seed, stop sequences, per-token log-probabilities,
 * and `score` (log-likelihood of a continuation given a context).
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from './errors.js'
import { BatchCache } from './models/batch-cache.js'
import { decodeStepOnDevice, prefillOnDevice } from './models/decode.js'
import type { CausalLM } from './models/lm.js'
import { Rng } from './rng.js'

export type GenerateOptions = {
  /** @default 32 */
  readonly maxNewTokens?: number
  /** 0 is greedy. @default 1 */
  readonly temperature?: number
  /** Sample among the k most likely tokens only. @default none */
  readonly topK?: number
  /** Sample among the smallest set of tokens whose probability reaches p. @default 1 */
  readonly topP?: number
  /** @default 0 */
  readonly seed?: number
  /** Stop once the output ends with any of these token sequences (they are kept in the output). */
  readonly stop?: readonly (readonly number[])[]
  /** Decode with the KV cache; false re-runs the full sequence each token. @default true */
  readonly useCache?: boolean
}

export type Generation = {
  /** New tokens only. */
  readonly tokens: number[]
  /** log p(token | prefix) of each new token under the model (temperature 1, no filtering). */
  readonly logprobs: number[]
  readonly finish: 'stop' | 'length'
}

function logSoftmax(x: Float32Array): Float64Array {
  let max = -Infinity
  for (const v of x) max = Math.max(max, v)
  let s = 0
  for (const v of x) s += Math.exp(v - max)
  const lse = max + Math.log(s)
  return Float64Array.from(x, (v) => v - lse)
}

/** Pick a token from the last position's logits. */
export function sampleToken(logits: Float32Array, o: GenerateOptions, rng: Rng): number {
  const temp = o.temperature ?? 1
  if (temp === 0) return logits.reduce((best, v, i) => (v > logits[best]! ? i : best), 0)
  const lp = logSoftmax(Float32Array.from(logits, (v) => v / temp))
  let order = [...lp.keys()].sort((a, b) => lp[b]! - lp[a]!)
  if (o.topK !== undefined) order = order.slice(0, Math.max(1, o.topK))
  const topP = o.topP ?? 1
  if (topP < 1) {
    let cum = 0,
      keep = 0
    while (keep < order.length && cum < topP) cum += Math.exp(lp[order[keep++]!]!)
    order = order.slice(0, Math.max(1, keep))
  }
  const probs = order.map((i) => Math.exp(lp[i]!))
  let u = rng.next() * probs.reduce((a, b) => a + b, 0)
  for (let j = 0; j < order.length; j++) {
    u -= probs[j]!
    if (u <= 0) return order[j]!
  }
  return order[order.length - 1]!
}

/**
 * The decoding loop. It yields each logits tensor it needs read and takes back its values, so that
 * one loop serves the synchronous reads of the CPU backends ({@link generate}) and the asynchronous
 * ones of webgpu ({@link generateAsync}); the driver disposes what it is handed.
 */
function* decoding(
  model: CausalLM,
  prompt: readonly number[],
  o: GenerateOptions,
): Generator<tf.Tensor, Generation, Float32Array> {
  if (prompt.length === 0) throw new LevanterError('BAD_SHAPE', 'generate: prompt is empty; give at least one token')
  const max = o.maxNewTokens ?? 32,
    rng = new Rng(o.seed ?? 0),
    useCache = o.useCache ?? true,
    V = model.config.vocabSize
  const seq = [...prompt],
    tokens: number[] = [],
    logprobs: number[] = []
  const cache = useCache ? new BatchCache() : undefined
  function* next(): Generator<tf.Tensor, Float32Array, Float32Array> {
    if (!cache) {
      const T = seq.length
      const d = yield tf.tidy(() => model.forward(tf.tensor2d([seq], [1, T], 'int32')))
      return d.slice((T - 1) * V, T * V)
    }
    if (cache.rows > 0) return yield decodeStepOnDevice(model, cache, [seq[seq.length - 1]!])
    const p = prefillOnDevice(model, [seq], false)
    cache.add(p.kv, [seq.length])
    return p.split(yield p.logits)[0]!
  }
  try {
    while (tokens.length < max) {
      if (seq.length > model.config.seqLen) return { tokens, logprobs, finish: 'length' }
      const last = yield* next()
      const tok = sampleToken(last, o, rng)
      logprobs.push(logSoftmax(last)[tok]!)
      tokens.push(tok)
      seq.push(tok)
      if (
        o.stop?.some(
          (s) =>
            s.length > 0 && s.length <= tokens.length && s.every((t, i) => tokens[tokens.length - s.length + i] === t),
        )
      ) {
        return { tokens, logprobs, finish: 'stop' }
      }
      if (seq.length >= model.config.seqLen && tokens.length < max) return { tokens, logprobs, finish: 'length' }
    }
    return { tokens, logprobs, finish: 'length' }
  } finally {
    cache?.dispose()
  }
}

/** Continue `prompt` (token ids) with up to `maxNewTokens` tokens. */
export function generate(model: CausalLM, prompt: readonly number[], o: GenerateOptions = {}): Generation {
  const loop = decoding(model, prompt, o)
  try {
    let r = loop.next()
    while (!r.done) {
      const t = r.value
      let d: Float32Array
      try {
        d = t.dataSync() as Float32Array
      } finally {
        t.dispose()
      }
      r = loop.next(d)
    }
    return r.value
  } finally {
    loop.return(undefined as never) // releases the cache when a read failed
  }
}

/** {@link generate} with asynchronous reads: what runs on webgpu, where a GPU tensor cannot be read synchronously. */
export async function generateAsync(
  model: CausalLM,
  prompt: readonly number[],
  o: GenerateOptions = {},
): Promise<Generation> {
  const loop = decoding(model, prompt, o)
  try {
    let r = loop.next()
    while (!r.done) {
      const t = r.value
      let d: Float32Array
      try {
        d = (await t.data()) as Float32Array
      } finally {
        t.dispose()
      }
      r = loop.next(d)
    }
    return r.value
  } finally {
    loop.return(undefined as never)
  }
}

/** log p(continuation | context): the sum, each token's term, and whether greedy decoding would produce it. */
export function score(
  model: CausalLM,
  context: readonly number[],
  continuation: readonly number[],
): { logprob: number; tokenLogprobs: number[]; greedy: boolean } {
  if (context.length === 0 || continuation.length === 0)
    throw new LevanterError('BAD_SHAPE', 'score: context and continuation must each have at least one token')
  const all = [...context, ...continuation].slice(0, -1)
  if (all.length > model.config.seqLen)
    throw new LevanterError(
      'BAD_SHAPE',
      `score: ${all.length} positions exceed seqLen ${model.config.seqLen}; shorten the context`,
    )
  const V = model.config.vocabSize
  const d = tf.tidy(() => model.forward(tf.tensor2d([all], [1, all.length], 'int32')).dataSync() as Float32Array)
  const tokenLogprobs: number[] = []
  let greedy = true
  continuation.forEach((tok, j) => {
    const row = d.subarray((context.length - 1 + j) * V, (context.length + j) * V)
    tokenLogprobs.push(logSoftmax(row)[tok]!)
    if (row.some((v) => v > row[tok]!)) greedy = false
  })
  return { logprob: tokenLogprobs.reduce((a, b) => a + b, 0), tokenLogprobs, greedy }
}
