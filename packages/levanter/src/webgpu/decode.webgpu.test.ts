/**
 * Batched decoding on the webgpu backend (SwiftShader where there is no GPU): chunked prefill and
 * decode steps read their logits asynchronously, as webgpu requires, and match the full forward.
 */
import * as tf from '@tensorflow/tfjs'
import { beforeAll, expect, test } from 'vitest'
import { initBackend } from '../backend.js'
import { BatchCache } from '../models/batch-cache.js'
import { decodeStep, prefillChunk } from '../models/decode.js'
import { createModel } from '../models/lm.js'
import { TINY_MODELS } from '../test-support/backend-train.js'

beforeAll(async () => {
  await initBackend('webgpu')
}, 120_000)

test.each(['gpt2', 'llama', 'qwen3', 'mixtral'] as const)(
  '%s: a prompt prefilled in chunks, then decoded, equals the full forward within 1e-4, on webgpu',
  async (type) => {
    expect(tf.getBackend()).toBe('webgpu')
    // the tiny models, one size for all (SwiftShader compiles each distinct product once); llama with two query heads
    // sharing one key/value head
    const config = { ...TINY_MODELS[type], ...(type === 'llama' ? { nHeads: 2, nKvHeads: 1 } : {}) }
    const m = createModel(config, 4)
    const prompt = [1, 2, 3, 4, 5, 6, 7],
      seq = [...prompt]
    const cache = new BatchCache()
    const got: number[] = []
    for (let i = 0; i < prompt.length; i += 3)
      got.push(...(await prefillChunk(m, cache, [prompt.slice(i, i + 3)], true))[0]!)
    for (const tok of [8, 9]) {
      seq.push(tok)
      got.push(...(await decodeStep(m, cache, [tok])))
    }
    const logits = tf.tidy(() => m.forward(tf.tensor2d([seq], [1, seq.length], 'int32')))
    const want = await logits.data()
    logits.dispose()
    expect(got).toHaveLength(want.length)
    let d = 0
    for (let i = 0; i < got.length; i++) d = Math.max(d, Math.abs(got[i]! - want[i]!))
    expect(d).toBeLessThan(1e-4)
    cache.dispose()
    m.dispose()
  },
  120_000,
)
