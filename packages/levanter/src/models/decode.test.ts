import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { useDecodeKernel } from '../kernels/attention.js'
import { nativeKernels } from '../kernels/native-ops.js'
import { BatchCache } from './batch-cache.js'
import { decodeStep, decodeStepOnDevice, prefill, prefillChunk } from './decode.js'
import { createModel } from './lm.js'
import type { CausalLM } from './lm.js'
import type { ModelConfigInput } from './config.js'

const tiny = { vocabSize: 23, seqLen: 20, dModel: 16, nLayers: 2, nHeads: 2 }
/** Qwen3 with grouped-query attention (4 query heads over 2 key/value heads) and heads of 6, not dModel / nHeads. */
const qwen3 = { type: 'qwen3', ...tiny, nHeads: 4, nKvHeads: 2, headDim: 6 } as const
const configOf = (type: 'gpt2' | 'llama' | 'qwen3') => (type === 'qwen3' ? qwen3 : { type, ...tiny })

beforeAll(async () => {
  await initBackend()
})

/** The full forward pass over `seq` alone: logits [T·V]. */
const full = (m: CausalLM, seq: readonly number[]) =>
  tf.tidy(() => m.forward(tf.tensor2d([[...seq]], [1, seq.length], 'int32')).dataSync() as Float32Array)

/**
 * A decode step's logits equal the full forward's: bit for bit in most steps (levanter's GEMM keeps a
 * row's operation order whatever the rows around it), within float32 rounding (a few 1e-9) in others.
 */
function expectSame(got: ArrayLike<number>, want: ArrayLike<number>, within = 1e-6): void {
  expect(got.length).toBe(want.length)
  let d = 0
  for (let i = 0; i < got.length; i++) d = Math.max(d, Math.abs(got[i]! - want[i]!))
  expect(d).toBeLessThan(within)
}

describe.each(['gpt2', 'llama', 'qwen3'] as const)('%s batched decoding', (type) => {
  test('prefill of prompts of different lengths gives each the full forward logits at every position', async () => {
    const m = createModel(configOf(type), 11)
    const prompts = [[3, 1, 4, 1, 5, 9], [2], [7, 1, 8]]
    const { logits, kv } = await prefill(m, prompts, true)
    prompts.forEach((p, r) => expect(Array.from(logits[r]!)).toEqual(Array.from(full(m, p))))
    const last = await prefill(m, prompts, false)
    prompts.forEach((p, r) =>
      expect(Array.from(last.logits[r]!)).toEqual(Array.from(full(m, p).slice((p.length - 1) * tiny.vocabSize))),
    )
    for (const l of [...kv, ...last.kv]) tf.dispose([l.k, l.v])
    m.dispose()
  })

  test(
    'rows at different positions decoded in one batch equal the full ' +
      'forward at each position; rows join and leave',
    async () => {
      const m = createModel(configOf(type), 12)
      const V = tiny.vocabSize
      const before = tf.memory().numTensors
      const seqs = [[5, 6, 7, 8, 9], [4]]
      const cache = new BatchCache()
      const first = await prefill(m, seqs, false)
      cache.add(
        first.kv,
        seqs.map((s) => s.length),
      )
      const check = (logits: Float32Array) =>
        seqs.forEach((s, r) => {
          const want = full(m, s).slice((s.length - 1) * V)
          expectSame(logits.subarray(r * V, (r + 1) * V), want)
        })
      check(Float32Array.from(first.logits.flatMap((l) => Array.from(l))))
      for (let t = 0; t < 4; t++) {
        if (t === 2) {
          // a third row joins at its position 2 while the others are further on
          cache.add((await prefill(m, [[1, 2]], false)).kv, [2])
          seqs.push([1, 2])
        }
        const next = seqs.map((s, r) => (s.at(-1)! * 7 + r + t) % V)
        seqs.forEach((s, r) => s.push(next[r]!))
        check(await decodeStep(m, cache, next))
        expect(cache.lengths).toEqual(seqs.map((s) => s.length))
      }
      cache.keep([2, 0]) // the short row leaves; the others keep their positions
      const kept = [seqs[2]!, seqs[0]!]
      kept.forEach((s) => s.push(3))
      const logits = await decodeStep(m, cache, [3, 3])
      kept.forEach((s, r) => expectSame(logits.subarray(r * V, (r + 1) * V), full(m, s).slice((s.length - 1) * V)))
      cache.dispose()
      expect(tf.memory().numTensors).toBe(before)
      m.dispose()
    },
  )

  test('a step past the context length fails with BAD_SHAPE naming seqLen', async () => {
    const m = createModel({ ...configOf(type), seqLen: 4 }, 13)
    const cache = new BatchCache()
    const p = await prefill(m, [[1, 2, 3, 4]], false)
    cache.add(p.kv, [4])
    await expect(decodeStep(m, cache, [1])).rejects.toThrow(/seqLen 4/)
    cache.dispose()
    m.dispose()
  })
})

/** GPT-2; Llama with grouped-query attention and llama3 rotary scaling; Llama with one key/value head and linear
 * scaling (positions past the original context scaled); Qwen3 with grouped-query attention and its own head size. */
const CHUNKED: [string, ModelConfigInput][] = [
  ['gpt2', { type: 'gpt2', ...tiny }],
  [
    'llama gqa + llama3 rope',
    {
      type: 'llama',
      ...tiny,
      nHeads: 4,
      nKvHeads: 2,
      ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8 },
    },
  ],
  [
    'llama mqa + linear rope',
    { type: 'llama', ...tiny, nHeads: 2, nKvHeads: 1, ropeScaling: { type: 'linear', factor: 2 } },
  ],
  ['qwen3 gqa + headDim 6', qwen3],
]

describe.each(CHUNKED)('%s chunked prefill', (_name, config) => {
  const V = tiny.vocabSize
  const prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9] // 13 tokens

  // Not bit for bit: attention over a chunk's narrower key range sums its products in another order than over the
  // whole prompt (a few 1e-8 here).
  test.each([1, 3, 7])(
    'a prompt prefilled in chunks of %i tokens, then decoded, gives the one-pass prefill and full forward logits ' +
      'within 1e-5',
    async (size) => {
      const m = createModel(config, 21)
      const before = tf.memory().numTensors
      const cache = new BatchCache()
      const got: number[] = []
      for (let i = 0; i < prompt.length; i += size) {
        const [l] = await prefillChunk(m, cache, [prompt.slice(i, i + size)], true)
        got.push(...l!)
        expect(cache.lengths).toEqual([Math.min(prompt.length, i + size)])
      }
      const onePass = await prefill(m, [prompt], true)
      expectSame(got, onePass.logits[0]!, 1e-5)
      expectSame(got, full(m, prompt), 1e-5)
      // decoding after the chunks equals decoding after the one-pass prefill, and the full forward
      const other = new BatchCache()
      other.add(onePass.kv, [prompt.length])
      const seq = [...prompt]
      for (const tok of [7, 0, 11]) {
        seq.push(tok)
        const a = await decodeStep(m, cache, [tok]),
          b = await decodeStep(m, other, [tok])
        expectSame(a, b, 1e-5)
        expectSame(a, full(m, seq).slice((seq.length - 1) * V), 1e-5)
      }
      // last-position logits only
      const last = new BatchCache()
      const [l1] = await prefillChunk(m, last, [prompt.slice(0, 6)], false)
      const [l2] = await prefillChunk(m, last, [prompt.slice(6)], false)
      expect(Array.from(l1!)).toEqual(Array.from(full(m, prompt.slice(0, 6)).slice(5 * V)))
      expectSame(l2!, full(m, prompt).slice((prompt.length - 1) * V), 1e-5)
      for (const c of [cache, other, last]) c.dispose()
      expect(tf.memory().numTensors).toBe(before)
      m.dispose()
    },
  )

  test("decode steps run attention as one native kernel: the tensor ops' logits and cache within 1e-6", async (ctx) => {
    const ops = nativeKernels()
    if (!ops?.decodeAttention) return ctx.skip('the native kernels do not run here')
    const m = createModel(config, 24)
    const seqs = [prompt.slice(0, 9), prompt.slice(2, 4), [6]]
    const run = async (fused: boolean) => {
      const was = useDecodeKernel(fused)
      try {
        const cache = new BatchCache()
        await prefillChunk(m, cache, seqs, false)
        const logits: Float32Array[] = []
        // concats the steps ran: the fused kernel grows the cache itself (llama's rotary has two of its own)
        let concats = 0
        for (const tok of [7, 0, 11, 2]) {
          // the step on tensor ops (decodeStep would take GPT-2's one native call, which runs no tfjs kernels)
          const p = await tf.profile(async () => {
            const t = decodeStepOnDevice(m, cache, [tok, tok, tok])
            logits.push((await t.data()) as Float32Array)
            t.dispose()
          })
          concats += p.kernels.filter((k) => k.name === 'Concat').length
        }
        const kv = cache.layers.map((l) => [l.k.dataSync(), l.v.dataSync()] as const)
        cache.dispose()
        return { logits, kv, concats }
      } finally {
        useDecodeKernel(was)
      }
    }
    const fused = await run(true),
      plain = await run(false)
    expect(plain.concats - fused.concats).toBe(4 * 2 * tiny.nLayers) // keys and values, every layer and step
    fused.logits.forEach((l, i) => expectSame(l, plain.logits[i]!))
    fused.kv.forEach(([k, v], i) => {
      expectSame(k, plain.kv[i]![0])
      expectSame(v, plain.kv[i]![1])
    })
    m.dispose()
  })

  test('rows at different positions each take a chunk in one pass and get the full forward logits', async () => {
    const m = createModel(config, 22)
    const seqs = [prompt.slice(0, 5), prompt.slice(5, 7), [4]]
    const cache = new BatchCache()
    await prefillChunk(m, cache, seqs, false) // an empty cache takes its rows, of any lengths
    expect(cache.lengths).toEqual([5, 2, 1])
    const chunks = [
      [2, 7, 1],
      [8, 2, 8],
      [1, 8, 2],
    ]
    const logits = await prefillChunk(m, cache, chunks, true)
    chunks.forEach((c, r) => {
      seqs[r]!.push(...c)
      expectSame(logits[r]!, full(m, seqs[r]!).slice((seqs[r]!.length - 3) * V), 1e-5)
    })
    expect(cache.lengths).toEqual([8, 5, 4])
    const step = await decodeStep(m, cache, [3, 3, 3])
    seqs.forEach((s, r) => {
      s.push(3)
      expectSame(step.subarray(r * V, (r + 1) * V), full(m, s).slice((s.length - 1) * V), 1e-5)
    })
    cache.dispose()
    m.dispose()
  })

  test('a chunk past the context, or chunks of unequal lengths, fail with BAD_SHAPE naming the lengths', async () => {
    const m = createModel(config, 23)
    const cache = new BatchCache()
    await prefillChunk(m, cache, [prompt.slice(0, 12), prompt.slice(0, 3)], false)
    await expect(
      prefillChunk(
        m,
        cache,
        [
          [1, 2, 3, 4, 5, 6, 7, 8, 9],
          [1, 2, 3, 4, 5, 6, 7, 8, 9],
        ],
        false,
      ),
    ).rejects.toThrow(/row 0 holds 12 positions; a chunk of 9 tokens would reach 21, past the model's seqLen 20/)
    await expect(prefillChunk(m, cache, [[1, 2], [1]], false)).rejects.toThrow(
      /chunk of 1 token.*row 1.*2 tokens.*row 0/,
    )
    await expect(prefillChunk(m, cache, [[1, 2]], false)).rejects.toThrow(/1 chunks for 2 cache rows/)
    expect(cache.lengths).toEqual([12, 3]) // untouched
    cache.dispose()
    m.dispose()
  })
})
