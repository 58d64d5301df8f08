import * as tf from '@tensorflow/tfjs'
import { beforeAll, describe, expect, test } from 'vitest'
import { createModel, generate, initBackend, score } from '@marin/levanter'
import { MetricsRegistry } from '@marin/rigging'
import { Engine } from './engine.js'
import type { SequenceResult, TokenEvent } from './engine.js'

const tiny = { vocabSize: 40, seqLen: 32, dModel: 16, nLayers: 2, nHeads: 2 }
/** Qwen3 with grouped-query attention (4 query heads over 2 key/value heads) and heads of 6, not dModel / nHeads;
 * Mixtral with grouped-query attention and 4 experts, 2 per token. */
const configOf = (type: 'gpt2' | 'llama' | 'qwen3' | 'mixtral') =>
  type === 'qwen3'
    ? { type, ...tiny, nHeads: 4, nKvHeads: 2, headDim: 6 }
    : type === 'mixtral'
      ? { type, ...tiny, nHeads: 4, nKvHeads: 2, nExperts: 4, topK: 2, intermediateSize: 24 }
      : { type, ...tiny }

beforeAll(async () => {
  await initBackend()
})

describe.each(['gpt2', 'llama', 'qwen3', 'mixtral'] as const)('%s engine', (type) => {
  test('sequences of different lengths decoded in one batch match levanter generate one by one', async () => {
    const model = createModel(configOf(type), 4)
    const engine = new Engine(model)
    const prompts = [[1, 2, 3], [7], [5, 6, 7, 8, 9, 10, 11]]
    const o = { temperature: 0.9, topP: 0.95, topK: 10 }
    const runs = await Promise.all(
      prompts.map(async (prompt, i) => {
        const ev: TokenEvent[] = []
        const r = await engine.submit({
          prompt,
          maxTokens: 8,
          ...o,
          seed: i,
          topLogprobs: 2,
          onToken: (e) => void ev.push(e),
        })
        return { r, ev }
      }),
    )
    prompts.forEach((prompt, i) => {
      const want = generate(model, prompt, { maxNewTokens: 8, ...o, seed: i })
      expect(runs[i]!.ev.map((e) => e.token)).toEqual(want.tokens)
      runs[i]!.ev.forEach((e, j) => expect(e.logprob).toBeCloseTo(want.logprobs[j]!, 4))
      expect(runs[i]!.r).toMatchObject({ finish: 'length', completionTokens: 8 })
      expect(runs[i]!.ev[0]!.top[0]![1]).toBeGreaterThanOrEqual(runs[i]!.ev[0]!.top[1]![1])
    })
    model.dispose()
  })

  test('16 greedy streams decoded together (the batch product) match levanter generate one by one', async () => {
    const model = createModel(configOf(type), 6)
    const steps: number[] = []
    const engine = new Engine(model, { onStep: (e) => void (e.kind === 'decode' && steps.push(e.rows)) })
    const prompts = Array.from({ length: 16 }, (_, i) =>
      Array.from({ length: 1 + (i % 5) }, (_, j) => (i * 7 + j * 3) % 40),
    )
    const runs = await Promise.all(
      prompts.map(async (prompt, i) => {
        const ev: TokenEvent[] = []
        await engine.submit({
          prompt,
          maxTokens: 6,
          temperature: 0,
          topP: 1,
          seed: i,
          topLogprobs: 0,
          onToken: (e) => void ev.push(e),
        })
        return ev
      }),
    )
    // the prompts fit one prefill pass: every decode step ran all 16 rows
    expect(steps).toEqual(new Array<number>(5).fill(16))
    prompts.forEach((prompt, i) => {
      const want = generate(model, prompt, { maxNewTokens: 6, temperature: 0 })
      expect(runs[i]!.map((e) => e.token)).toEqual(want.tokens)
      runs[i]!.forEach((e, j) => expect(e.logprob).toBeCloseTo(want.logprobs[j]!, 4))
    })
    model.dispose()
  })

  test('prompt log-probs from a batched prefill of different lengths equal levanter score', async () => {
    const model = createModel(configOf(type), 5)
    const engine = new Engine(model)
    const prompts = [
      [3, 9, 4, 1, 7, 2],
      [8, 8],
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
    ]
    const got = await Promise.all(
      prompts.map((prompt) =>
        engine.submit({
          prompt,
          maxTokens: 0,
          temperature: 0,
          topP: 1,
          seed: 0,
          topLogprobs: 1,
          promptLogprobs: true,
          onToken: () => {},
        }),
      ),
    )
    prompts.forEach((prompt, i) => {
      const want = score(model, prompt.slice(0, 1), prompt.slice(1))
      expect(got[i]!.promptLogprobs!.map((e) => e.token)).toEqual(prompt.slice(1))
      got[i]!.promptLogprobs!.forEach((e, j) => expect(e.logprob).toBeCloseTo(want.tokenLogprobs[j]!, 4))
    })
    model.dispose()
  })
})

test('a request that arrives mid-generation joins the running batch at the next step', async () => {
  const model = createModel({ type: 'gpt2', ...tiny }, 1)
  const metrics = new MetricsRegistry()
  const engine = new Engine(model, { metrics })
  const before = tf.memory().numTensors
  const order: string[] = []
  let late: Promise<unknown> | undefined
  const first = engine.submit({
    prompt: [1, 2],
    maxTokens: 20,
    temperature: 0,
    topP: 1,
    seed: 0,
    topLogprobs: 0,
    onToken: () => {
      order.push('a')
      if (order.length === 3)
        late = engine.submit({
          prompt: [3],
          maxTokens: 2,
          temperature: 0,
          topP: 1,
          seed: 0,
          topLogprobs: 0,
          onToken: () => void order.push('b'),
        })
    },
  })
  await first
  await late
  // b's tokens come while a is still generating, not after it.
  expect(order.lastIndexOf('b')).toBeLessThan(order.lastIndexOf('a'))
  const batch = metrics.snapshot().metrics.find((m) => m.name === 'marin_serve_batch_size')
  // 19 decode steps for a's 20 tokens (the first comes from its prefill); b rode along in one of them.
  expect(batch).toMatchObject({ samples: [{ count: 19, sum: 20, max: 2 }] })
  expect(tf.memory().numTensors).toBe(before) // every cache row was freed
  model.dispose()
})

test('free slots go round-robin between the waiting groups, not to the first queued', async () => {
  const model = createModel({ type: 'gpt2', ...tiny }, 6)
  const engine = new Engine(model, { maxBatch: 2 })
  const started: string[] = []
  const run = (name: string, group: object) => {
    let first = true
    return engine.submit({
      prompt: [1, 2],
      maxTokens: 3,
      temperature: 0,
      topP: 1,
      seed: 0,
      topLogprobs: 0,
      group,
      onToken: () => void (first && started.push(name), (first = false)),
    })
  }
  const large = {},
    small = {},
    other = {}
  const all = [
    ...['a0', 'a1', 'a2', 'a3', 'a4', 'a5'].map((n) => run(n, large)),
    run('b0', small),
    run('b1', small),
    run('c0', other),
  ]
  await Promise.all(all)
  // Slots go round-robin between the three requests, not first come, first served (a0 … a5, b0, b1, c0).
  expect(started).toEqual(['a0', 'b0', 'c0', 'a1', 'b1', 'a2', 'a3', 'a4', 'a5'])
  expect(engine.load).toEqual({ active: 0, queued: 0 })
  model.dispose()
})

test('an aborted request is cancelled and frees its slot; the prompt can be scored', async () => {
  const model = createModel({ type: 'gpt2', ...tiny }, 2)
  const engine = new Engine(model)
  const ac = new AbortController()
  let n = 0
  const r = await engine.submit({
    prompt: [1, 2, 3, 4],
    maxTokens: 25,
    temperature: 1,
    topP: 1,
    seed: 0,
    topLogprobs: 1,
    promptLogprobs: true,
    signal: ac.signal,
    onToken: () => void (++n === 2 && ac.abort()),
  })
  expect(r.finish).toBe('cancelled')
  expect(r.completionTokens).toBeLessThan(5)
  expect(r.promptLogprobs?.map((e) => e.token)).toEqual([2, 3, 4])
  expect(engine.load).toEqual({ active: 0, queued: 0 })
  model.dispose()
})

test('a forward pass that fails rejects every sequence in flight instead of leaving them hanging', async () => {
  const model = createModel({ type: 'gpt2', ...tiny }, 3)
  const engine = new Engine(model)
  let n = 0
  const req = (onToken: () => void) =>
    engine.submit({ prompt: [1, 2], maxTokens: 10, temperature: 0, topP: 1, seed: 0, topLogprobs: 0, onToken })
  const results = await Promise.allSettled([req(() => void (++n === 3 && model.dispose())), req(() => {})])
  expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected'])
  expect(String((results[0] as PromiseRejectedResult).reason)).toMatch(/no parameter/)
  expect(engine.load).toEqual({ active: 0, queued: 0 })
})

test('prompts are prefilled a token budget at a time, and running sequences decode in between', async () => {
  const model = createModel({ type: 'gpt2', ...tiny }, 2)
  const engine = new Engine(model, { maxPrefillTokens: 10 })
  const order: string[] = []
  const base = { maxTokens: 2, temperature: 0, topP: 1, seed: 0, topLogprobs: 0 }
  let joined: Promise<unknown>[] = []
  const running = engine.submit({
    ...base,
    prompt: [1, 2],
    maxTokens: 20,
    onToken: () => {
      order.push('a')
      if (order.length === 2)
        // Four prompts of 6 tokens arrive together: 24 tokens, more than the budget of 10.
        joined = ['b', 'c', 'd', 'e'].map((name, i) =>
          engine.submit({ ...base, prompt: [3 + i, 4, 5, 6, 7, 8], onToken: () => void order.push(name) }),
        )
    },
  })
  await running
  await Promise.all(joined)
  const firsts = ['b', 'c', 'd', 'e'].map((n) => order.indexOf(n))
  // One 6-token prompt per step: each joins a step after the one before, with `a` decoding between.
  for (let i = 1; i < 4; i++) {
    expect(firsts[i]).toBeGreaterThan(firsts[i - 1]!)
    expect(order.slice(firsts[i - 1]!, firsts[i]).filter((x) => x === 'a').length).toBeGreaterThanOrEqual(1)
  }
  // A prompt longer than the budget is still admitted (alone).
  const long = await engine.submit({ ...base, prompt: Array.from({ length: 14 }, (_, i) => i + 1), onToken: () => {} })
  expect(long.completionTokens).toBe(2)
  model.dispose()
})

describe.each(['gpt2', 'llama', 'qwen3', 'mixtral'] as const)('%s chunked prefill', (type) => {
  test(
    'a long prompt arriving while another stream decodes is prefilled in chunks with decode steps between them, ' +
      'and completes as unchunked',
    async () => {
      const model = createModel(configOf(type), 7)
      const long = Array.from({ length: 25 }, (_, i) => (i * 7 + 3) % tiny.vocabSize)
      const base = { temperature: 0, topP: 1, seed: 0, topLogprobs: 0 }
      const log: string[] = []
      const engine = new Engine(model, {
        maxPrefillTokens: 6,
        onStep: (e) => void log.push(e.kind === 'decode' ? `decode ${e.rows}` : `${e.kind} ${e.tokens}`),
      })
      const before = tf.memory().numTensors
      const longTokens: number[] = []
      let longDone: Promise<SequenceResult> | undefined
      const a = engine.submit({
        ...base,
        prompt: [1, 2],
        maxTokens: 12,
        onToken: () => {
          log.push('a')
          if (!longDone)
            longDone = engine.submit({
              ...base,
              prompt: long,
              maxTokens: 5,
              promptLogprobs: true,
              onToken: (e) => void (longTokens.push(e.token), log.push('long')),
            })
        },
      })
      await a
      const r = await longDone!
      // 25 prompt tokens in chunks of 6: five passes, each followed by a decode step in which `a` gets a token.
      const chunks = log.flatMap((l, i) => (l.startsWith('prefill-chunk') ? [i] : []))
      expect(chunks.map((i) => log[i])).toEqual([6, 6, 6, 6, 1].map((n) => `prefill-chunk ${n}`))
      for (let c = 1; c < chunks.length; c++) {
        const between = log.slice(chunks[c - 1]! + 1, chunks[c])
        expect(between).toEqual(['decode 1', 'a'])
      }
      // the same tokens as one-pass prefill, in levanter's generate and in an engine whose budget holds the prompt
      const want = generate(model, long, { maxNewTokens: 5, temperature: 0 }).tokens
      expect(longTokens).toEqual(want)
      const whole: number[] = []
      const wholeLog: string[] = []
      const unchunked = new Engine(model, {
        maxPrefillTokens: 512,
        onStep: (e) => void wholeLog.push(e.kind === 'decode' ? 'decode' : `${e.kind} ${e.tokens}`),
      })
      await unchunked.submit({ ...base, prompt: long, maxTokens: 5, onToken: (e) => void whole.push(e.token) })
      expect(whole).toEqual(want)
      expect(wholeLog[0]).toBe('prefill 25')
      // prompt log-probs gathered over the chunks equal levanter's score
      const s = score(model, long.slice(0, 1), long.slice(1))
      expect(r.promptLogprobs!.map((e) => e.token)).toEqual(long.slice(1))
      r.promptLogprobs!.forEach((e, j) => expect(e.logprob).toBeCloseTo(s.tokenLogprobs[j]!, 4))
      expect(engine.load).toEqual({ active: 0, queued: 0 })
      expect(tf.memory().numTensors).toBe(before)
      model.dispose()
    },
  )
})

test('a long prompt cancelled between its chunks frees its cache; the running stream goes on', async () => {
  const model = createModel({ type: 'gpt2', ...tiny }, 8)
  const engine = new Engine(model, {
    maxPrefillTokens: 4,
    onStep: (e) => void (e.kind === 'prefill-chunk' && ++chunks === 2 && ac.abort()),
  })
  let chunks = 0
  const ac = new AbortController()
  const before = tf.memory().numTensors
  const base = { temperature: 0, topP: 1, seed: 0, topLogprobs: 0, onToken: () => {} }
  const [a, long] = await Promise.all([
    engine.submit({ ...base, prompt: [1, 2], maxTokens: 10 }),
    engine.submit({ ...base, prompt: Array.from({ length: 20 }, (_, i) => i + 1), maxTokens: 3, signal: ac.signal }),
  ])
  expect(chunks).toBe(2)
  expect(long).toMatchObject({ finish: 'cancelled', completionTokens: 0 })
  expect(a).toMatchObject({ finish: 'length', completionTokens: 10 })
  expect(engine.load).toEqual({ active: 0, queued: 0 })
  expect(tf.memory().numTensors).toBe(before)
  model.dispose()
})

test('a short request arriving while a long prompt is prefilled in chunks joins between two chunks', async () => {
  const model = createModel({ type: 'llama', ...tiny }, 9)
  const long = Array.from({ length: 25 }, (_, i) => (i * 5 + 1) % tiny.vocabSize)
  const base = { temperature: 0, topP: 1, seed: 0, topLogprobs: 0 }
  const log: string[] = []
  const got = { long: [] as number[], b: [] as number[] }
  let b: Promise<unknown> | undefined
  const engine = new Engine(model, {
    maxPrefillTokens: 6,
    onStep: (e) => {
      log.push(e.kind === 'decode' ? `decode ${e.rows}` : `${e.kind} ${e.tokens}`)
      if (e.kind === 'prefill-chunk' && !b)
        b = engine.submit({ ...base, prompt: [5, 6], maxTokens: 3, onToken: (t) => void got.b.push(t.token) })
    },
  })
  await engine.submit({ ...base, prompt: long, maxTokens: 4, onToken: (t) => void got.long.push(t.token) })
  await b
  // b is prefilled after the first chunk and decodes while the others follow, one prefill pass per step
  expect(log.slice(0, 5)).toEqual(['prefill-chunk 6', 'prefill 2', 'decode 1', 'prefill-chunk 6', 'decode 1'])
  expect(got.b).toEqual(generate(model, [5, 6], { maxNewTokens: 3, temperature: 0 }).tokens)
  expect(got.long).toEqual(generate(model, long, { maxNewTokens: 4, temperature: 0 }).tokens)
  model.dispose()
})
