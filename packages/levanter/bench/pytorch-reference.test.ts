import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { initBackend } from '../src/backend.js'
import { exportHf } from '../src/checkpoint/hf.js'
import type { Batch } from '../src/data/batch.js'
import { Gpt2LM } from '../src/models/lm.js'
import { AdamW, AdamWConfig } from '../src/optim/adamw.js'
import { generate } from '../src/generate.js'
import { computeGrads } from '../src/train-step.js'
import { findTorch, pytorchRun, run, tryRun } from './processes.js'

const torch = findTorch()
const python = 'python' in torch ? torch.python : undefined
// Weights large enough that GELU's tanh form, the LayerNorms and the softmax shape the loss, a learning rate large
// enough that the AdamW updates (weight decay, clipping, moments) move it.
const tiny = { vocabSize: 64, seqLen: 16, dModel: 32, nLayers: 2, nHeads: 2, initStd: 0.3 }
const LR = 0.02
const BATCH = 4
const sizeFlags = ['--vocab', '64', '--context', '16', '--batch', String(BATCH)]

/** The PyTorch reference's batch `step`: consecutive windows of the bench's token stream. */
function referenceBatch(step: number): Batch {
  const nTokens = 200_000,
    window = BATCH * (tiny.seqLen + 1),
    start = (step * window) % (nTokens - window)
  const inputs = new Int32Array(BATCH * tiny.seqLen),
    targets = new Int32Array(BATCH * tiny.seqLen)
  for (let r = 0; r < BATCH; r++)
    for (let t = 0; t < tiny.seqLen; t++) {
      const i = start + r * (tiny.seqLen + 1) + t
      inputs[r * tiny.seqLen + t] = (i * 7919 + (i >> 7)) % tiny.vocabSize
      targets[r * tiny.seqLen + t] = ((i + 1) * 7919 + ((i + 1) >> 7)) % tiny.vocabSize
    }
  return { inputs, targets, mask: new Float32Array(BATCH * tiny.seqLen).fill(1), batchSize: BATCH, seqLen: tiny.seqLen }
}

describe('bench processes', () => {
  test('a run that fails reports its exit and the line naming the error', () => {
    const o = tryRun({
      label: 'failing',
      command: process.execPath,
      args: ['-e', 'console.error("loading…"); throw new RangeError("offset is out of bounds")'],
      prefix: '{"variant"',
    })
    expect(o.ok).toBe(false)
    if (!o.ok) expect(o.error).toMatch(/^failing: exit 1: RangeError: offset is out of bounds$/)
  })

  test('a run that prints its result line returns it', () => {
    const o = tryRun({
      label: 'ok',
      command: process.execPath,
      args: ['-e', 'console.log("noise"); console.log(JSON.stringify({ variant: "x", tokensPerSec: 5 }))'],
      prefix: '{"variant"',
    })
    expect(o).toEqual({ ok: true, result: { variant: 'x', tokensPerSec: 5 } })
  })

  test('without a python that imports torch, findTorch says why', () => {
    const saved = process.env.LEVANTER_BENCH_PYTHON
    process.env.LEVANTER_BENCH_PYTHON = '/nonexistent/python3'
    try {
      expect(findTorch()).toEqual({ why: expect.stringMatching(/^\/nonexistent\/python3: .*ENOENT/) })
    } finally {
      if (saved === undefined) delete process.env.LEVANTER_BENCH_PYTHON
      else process.env.LEVANTER_BENCH_PYTHON = saved
    }
  })
})

describe.skipIf(!python)('PyTorch reference (bench/pytorch-reference.py)', () => {
  let dir: string
  beforeAll(async () => {
    await initBackend()
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'levanter-pytorch-ref-'))
  })
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('bad usage exits 2 naming the flag', () => {
    const o = tryRun({ ...pytorchRun(python!, 1, '1'), args: [pytorchRun(python!, 1, '1').args[0]!, '--heads', '3'] })
    expect(o.ok).toBe(false)
    if (!o.ok) expect(o.error).toMatch(/exit 2: .*--d-model 256 is not a multiple of --heads 3/)
  })

  test("has levanter's parameters, and from levanter's weights trains to levanter's losses", async () => {
    const model = new Gpt2LM(tiny, 0)
    await exportHf(model, dir)
    const opt = new AdamW(AdamWConfig.parse({}), model)
    const losses: number[] = []
    for (let s = 0; s < 3; s++) {
      const b = referenceBatch(s)
      const { loss, grads } = computeGrads(model, b, BATCH * tiny.seqLen)
      losses.push(loss)
      opt.apply(grads, LR)
      for (const g of grads.values()) g.dispose()
    }
    const spec = pytorchRun(python!, 1, '3', { dModel: tiny.dModel, nLayers: tiny.nLayers, nHeads: tiny.nHeads })
    const r = run({
      ...spec,
      args: [...spec.args, ...sizeFlags, '--warmup', '0', '--lr', String(LR), '--init-from', dir],
    })
    expect(r.params).toBe(model.numParams())
    const theirs = r.losses as unknown as number[]
    expect(theirs).toHaveLength(3)
    // step 0: the same forward pass; steps 1–2: after the same AdamW updates
    theirs.forEach((l, i) => expect(Math.abs(l - losses[i]!)).toBeLessThan(2e-5)) // float32 rounding: ~1e-6
    expect(losses[2]).toBeLessThan(losses[0]!)
  })

  test("--decode: from levanter's weights, its KV-cache loop picks levanter's greedy tokens", async () => {
    const model = new Gpt2LM(tiny, 1)
    const folder = path.join(dir, 'decode')
    await exportHf(model, folder)
    const prompt = Array.from({ length: 5 }, (_, i) => (i * 7919) % tiny.vocabSize)
    const ours = generate(model, prompt, { maxNewTokens: 9, temperature: 0 }).tokens
    const spec = pytorchRun(python!, 1, '1', { dModel: tiny.dModel, nLayers: tiny.nLayers, nHeads: tiny.nHeads })
    const flags = ['--vocab', '64', '--context', '16', '--prompt', '5', '--decode', '9', '--warmup', '0']
    const r = run({ ...spec, args: [...spec.args, ...flags, '--init-from', folder] })
    expect(r.variant as unknown).toBe('pytorch-decode')
    expect(r.tokensPerSec).toBeGreaterThan(0)
    expect(r.tokens as unknown).toEqual(ours)
  })

  test('--decode past the context exits 2 naming the flags', () => {
    const spec = pytorchRun(python!, 1, '1')
    const o = tryRun({ ...spec, args: [...spec.args, '--context', '16', '--prompt', '10', '--decode', '7'] })
    expect(o.ok).toBe(false)
    if (!o.ok) expect(o.error).toMatch(/exit 2: .*--prompt 10 \+ --decode 7 is past --context 16/)
  })
})
