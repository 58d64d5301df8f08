/** @module A real in-process model for lm-eval tests (tiny GPT-2, BPE trained on the fixture text) that writes down
 * every request it is asked. */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { trainBpe } from '@marin/datakit'
import { Gpt2LM, initBackend } from '@marin/levanter'
import type { GenerateRequest, LanguageModel, LoglikelihoodRequest, LoglikelihoodResult } from '../language-model.js'
import { LocalLanguageModel } from '../local-model.js'

export const LM_EVAL_FIXTURES = fileURLToPath(new URL('../fixtures/lm-eval/', import.meta.url))
export const LM_EVAL_DATA = join(LM_EVAL_FIXTURES, 'data')

/** The rows of a JSONL file under the fixture data folder. */
export const fixtureRows = (p: string): Record<string, unknown>[] =>
  readFileSync(join(LM_EVAL_DATA, p), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)

/** The indices CPython's `random.Random(1234).sample(range(n), k)` gives on successive calls (the fixture's script). */
export function pythonSampleCalls(n: number, k: number): number[][] {
  const file = JSON.parse(readFileSync(join(LM_EVAL_FIXTURES, 'python-random-1234.json'), 'utf8')) as {
    samples: { n: number; k: number; calls: number[][] }[]
  }
  const found = file.samples.find((s) => s.n === n && s.k === k)
  if (!found) throw new Error(`python-random-1234.json has no sample(range(${n}), ${k})`)
  return found.calls
}

/** A tiny untrained GPT-2 (seeded, so deterministic) with a BPE tokenizer trained on the ARC fixture questions. */
export async function tinyLocalModel(): Promise<LocalLanguageModel> {
  await initBackend()
  const text = [
    ...fixtureRows('ai2_arc/ARC-Easy/test.jsonl').map((d) => String(d.question)),
    'the cat sat on the mat',
    'Question: how many? Answer: 12 #### 12',
  ]
  const tok = trainBpe(text, { vocabSize: 300 })
  return new LocalLanguageModel(new Gpt2LM({ vocabSize: 300, seqLen: 512, dModel: 16, nLayers: 1, nHeads: 2 }, 5), tok)
}

/** A model that passes every request to `inner` and keeps a copy. */
export class Recording implements LanguageModel {
  readonly description = 'recording'
  ll: LoglikelihoodRequest[] = []
  gen: GenerateRequest[] = []
  constructor(readonly inner: LanguageModel) {}
  async loglikelihood(r: readonly LoglikelihoodRequest[]): Promise<LoglikelihoodResult[]> {
    this.ll.push(...r)
    return this.inner.loglikelihood(r)
  }
  async generate(r: readonly GenerateRequest[]): Promise<string[]> {
    this.gen.push(...r)
    return this.inner.generate(r)
  }
}
