import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import type { LanguageModel, LoglikelihoodRequest } from './language-model.js'
import { readLmEvalTask } from './lm-eval-task.js'
import { characterLength, multipleChoiceMetrics, scoreChoices } from './multiple-choice.js'
import { runTask } from './run-task.js'

// Log-likelihoods chosen so that characters and UTF-8 bytes pick different winners:
// "café" is 4 characters and 5 bytes, "cafe" 4 and 4: by characters −4.4/4 < −4.2/4 ("cafe"),
// by bytes −4.4/5 > −4.2/4 ("café"). "🙂" is 1 character, 2 UTF-16 units and 4 bytes, "ok" 2, 2 and 2:
// by characters −1.5/1 < −2.4/2 ("ok"); by UTF-16 units (`.length`) or bytes "🙂" would win.
const LL: Record<string, number> = { café: -4.4, cafe: -4.2, '🙂': -1.5, ok: -2.4 }

/** A model whose log-likelihood of a continuation is fixed per choice (the delimiter's whitespace ignored). */
function fixed(): LanguageModel & { asked: LoglikelihoodRequest[] } {
  const asked: LoglikelihoodRequest[] = []
  return {
    description: 'fixed',
    asked,
    async loglikelihood(reqs) {
      asked.push(...reqs)
      return reqs.map((r) => {
        const ll = LL[r.continuation.trim()]
        if (ll === undefined) throw new Error(`no log-likelihood for ${JSON.stringify(r.continuation)}`)
        return { logprob: ll, greedy: false, tokens: 1 }
      })
    },
    async generate() {
      throw new Error('not asked for generation')
    },
  }
}

describe('multiple choice: acc, acc_norm (÷ characters) and acc_bytes (÷ UTF-8 bytes), as lm-eval', () => {
  test('characters are code points: an emoji is one, not two UTF-16 units', () => {
    expect(characterLength('café')).toBe(4)
    expect(characterLength('🙂')).toBe(1)
    expect('🙂'.length).toBe(2)
    expect(characterLength('')).toBe(0)
  })

  test('where bytes and characters disagree, acc_norm follows characters and acc_bytes bytes', () => {
    expect(scoreChoices([LL.café!, LL.cafe!], ['café', 'cafe'], 1)).toEqual({
      pred: 1,
      predNorm: 1,
      predBytes: 0,
      acc: 1,
      accNorm: 1,
      accBytes: 0,
    })
    expect(scoreChoices([LL['🙂']!, LL.ok!], ['🙂', 'ok'], 1)).toEqual({
      pred: 0,
      predNorm: 1,
      predBytes: 0,
      acc: 0,
      accNorm: 1,
      accBytes: 0,
    })
    // ties go to the first choice; an empty choice counts as length 1
    expect(scoreChoices([-2, -2], ['ab', 'cd'], 1).pred).toBe(0)
    expect(scoreChoices([-3, -2], ['', 'ab'], 0).predNorm).toBe(1)
    const m = multipleChoiceMetrics([
      scoreChoices([LL.café!, LL.cafe!], ['café', 'cafe'], 1),
      scoreChoices([LL['🙂']!, LL.ok!], ['🙂', 'ok'], 1),
    ])
    expect([...m.values()].map((v) => [v.metric, v.value])).toEqual([
      ['acc', 0.5],
      ['acc_norm', 1],
      ['acc_bytes', 0],
    ])
  })

  const items = [
    { context: 'Order a', choices: ['café', 'cafe'], gold: 1 },
    { context: 'Say yes', choices: ['🙂', 'ok'], gold: 1 },
  ]

  test('a JSONL task scores with it', async () => {
    const r = await runTask(fixed(), { name: 'mc', kind: 'multiple_choice', items })
    expect(r.metrics.map((m) => [m.metric, m.value])).toEqual([
      ['acc', 0.5],
      ['acc_norm', 1],
    ])
    expect(r.records.map((x) => x.predNorm)).toEqual([1, 1])
  })

  test('an lm-eval YAML task scores with it, and can ask for acc_bytes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mc-'))
    writeFileSync(join(dir, 'test.jsonl'), items.map((it) => JSON.stringify(it)).join('\n'))
    writeFileSync(
      join(dir, 'mc.yaml'),
      [
        'task: mc_unicode',
        'output_type: multiple_choice',
        'dataset_kwargs:',
        '  data_files: test.jsonl',
        'test_split: train',
        'doc_to_text: "{{context}}:"',
        'doc_to_target: gold',
        'doc_to_choice: choices',
        'metric_list:',
        '  - metric: acc',
        '  - metric: acc_norm',
        '  - metric: acc_bytes',
      ].join('\n'),
    )
    const model = fixed()
    const r = await runTask(model, await readLmEvalTask(join(dir, 'mc.yaml')))
    expect(model.asked[0]).toEqual({ context: 'Order a:', continuation: ' café' })
    expect(r.metrics.map((m) => [m.metric, m.value])).toEqual([
      ['acc', 0.5],
      ['acc_norm', 1],
      ['acc_bytes', 0],
    ])
  })
})
