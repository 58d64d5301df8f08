/**
 * @module Generation: incremental decoding on the batched decoder (models/decode.ts, one row; the
 * code a continuous-batching server runs; a GPT-2 on the native kernels takes each step as one native call,
 * kernels/native-gemv-decode.ts, the same logits bit for bit, optionally over bf16 weights) or full re-forward (for
 * comparison),
 * temperature / top-k / top-p sampling from a seed, stop sequences, per-token log-probabilities,
 * and `score` (log-likelihood of a continuation given a context).
 */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from './errors.js'
import type { DecodeWeights } from './kernels/native-gemv-decode.js'
import { setMatmulPrecision } from './kernels/native-gemm.js'
import { BatchCache } from './models/batch-cache.js'
import { decodeStepOnDevice, prefillOnDevice } from './models/decode.js'
import type { CausalLM } from './models/lm.js'
import { findArchitecture, registeredArchitectures } from './models/registry.js'
import type { ArchitectureDecode } from './models/registry.js'
import { Rng } from './rng.js'
import { logSoftmax, sampleToken } from './sampling.js'
import type { SampleOptions } from './sampling.js'

/** Temperature, top-k and top-p ({@link SampleOptions}: `sampling.ts` draws the tokens), length, seed and stops. */
export type GenerateOptions = SampleOptions & {
  /** @default 32 */
  readonly maxNewTokens?: number
  /** @default 0 */
  readonly seed?: number
  /** Stop once the output ends with any of these token sequences (they are kept in the output). */
  readonly stop?: readonly (readonly number[])[]
  /** Decode with the KV cache; false re-runs the full sequence each token. @default true */
  readonly useCache?: boolean
  /**
   * The weights the decode steps' products read: the model's float32 tensors, or bf16 copies converted once (half
   * the bytes per token; activations rounded to bf16, float32 sums; the prompt's prefill on the native bf16 GEMM).
   * `bf16` needs the one-call native step (a GPT-2 on the wasm backend with the native kernels) and a CPU with
   * AVX512_BF16: elsewhere it is `BAD_CONFIG` naming why. @default 'fp32'
   */
  readonly weights?: DecodeWeights
}

/**
 * One decode step (models/decode.ts's `decodeStepOnDevice`: `tokens[r]` fed to row r, the cache grown, logits [B, 1, V]
 * left on the device) as one native call where that runs (kernels/native-gemv-decode.ts: a GPT-2 on the native
 * kernels, the same bits), else on tensor ops. `weights: 'bf16'` reads bf16 copies of the matrices (BAD_CONFIG
 * where it cannot run).
 */
export function decodeStepFastOnDevice(
  model: CausalLM,
  cache: BatchCache,
  tokens: readonly number[],
  o: { readonly weights?: DecodeWeights } = {},
): tf.Tensor {
  const fast = fastDecodeOf(model)
  if (!fast && o.weights === 'bf16') throw noFastDecode(model)
  return fast?.step(model, cache, tokens, o) ?? decodeStepOnDevice(model, cache, tokens)
}

/** The faster decode step `model`'s architecture brings (models/registry.ts `decode`), if any. */
function fastDecodeOf(model: CausalLM): ArchitectureDecode<CausalLM, BatchCache, tf.Tensor> | undefined {
  return findArchitecture(model.config.type)?.decode as ArchitectureDecode<CausalLM, BatchCache, tf.Tensor> | undefined
}

function noFastDecode(model: CausalLM): LevanterError {
  const have = registeredArchitectures().filter((t) => findArchitecture(t)?.decode)
  return new LevanterError(
    'BAD_CONFIG',
    `weights 'bf16' needs the architecture's native decode step: "${model.config.type}" has none (those with one: ` +
      `${have.join(', ') || 'none'}); use fp32`,
  )
}

/**
 * Readies `model` for decode steps over `weights`: for `bf16`, converts its matrices once (again only after a
 * parameter is replaced); `BAD_CONFIG` naming why where bf16 weights cannot run here (a CPU or addon without
 * AVX512_BF16, a model or backend the one-call step does not run). A server calls it before taking requests.
 */
export function prepareDecodeWeights(model: CausalLM, weights: DecodeWeights): void {
  if (weights !== 'fp32' && weights !== 'bf16')
    throw new LevanterError('BAD_CONFIG', `weights "${String(weights)}" is not 'fp32' or 'bf16'`)
  const fast = fastDecodeOf(model)
  if (fast) fast.prepare(model, weights)
  else if (weights === 'bf16') throw noFastDecode(model)
}

/** {@link decodeStepFastOnDevice} with the logits read: [B·V] (models/decode.ts's `decodeStep`, faster). */
export async function decodeStepFast(
  model: CausalLM,
  cache: BatchCache,
  tokens: readonly number[],
  o: { readonly weights?: DecodeWeights } = {},
): Promise<Float32Array> {
  const t = decodeStepFastOnDevice(model, cache, tokens, o)
  try {
    return (await t.data()) as Float32Array
  } finally {
    t.dispose()
  }
}

export type Generation = {
  /** New tokens only. */
  readonly tokens: number[]
  /** log p(token | prefix) of each new token under the model (temperature 1, no filtering). */
  readonly logprobs: number[]
  readonly finish: 'stop' | 'length'
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
    V = model.config.vocabSize,
    weights = o.weights ?? 'fp32'
  if (weights !== 'fp32' && weights !== 'bf16')
    throw new LevanterError('BAD_CONFIG', `generate: weights "${String(weights)}" is not 'fp32' or 'bf16'`)
  if (weights === 'bf16') {
    if (!useCache)
      throw new LevanterError(
        'BAD_CONFIG',
        "generate: weights 'bf16' runs on the cached decode steps; drop useCache: false",
      )
    prepareDecodeWeights(model, 'bf16') // converts the matrices once; BAD_CONFIG naming why where it cannot
  }
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
    if (cache.rows > 0) return yield decodeStepFastOnDevice(model, cache, [seq[seq.length - 1]!], { weights })
    // bf16 weights: the prompt's products on the native bf16 GEMM too (bf16 operands, float32 sums), not float32
    const before = weights === 'bf16' ? setMatmulPrecision('bf16') : undefined
    let p: ReturnType<typeof prefillOnDevice>
    try {
      p = prefillOnDevice(model, [seq], false)
    } finally {
      if (before) setMatmulPrecision(before)
    }
    cache.add(p.kv, [seq.length])
    return p.split(yield p.logits)[0]!
  }
  try {
    while (tokens.length < max) {
      if (seq.length >= model.config.seqLen) return { tokens, logprobs, finish: 'length' } // prompt + output fit seqLen
      const last = yield* next()
      const lp = logSoftmax(last)
      const tok = sampleToken(last, o, rng, lp)
      logprobs.push(lp[tok]!)
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
