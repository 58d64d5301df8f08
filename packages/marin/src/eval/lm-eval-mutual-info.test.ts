import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, test } from 'vitest'
import type { LocalLanguageModel } from './local-model.js'
import { readLmEvalTask } from './lm-eval-task.js'
import { runTask } from './run-task.js'
import { LM_EVAL_DATA, Recording, fixtureRows, tinyLocalModel } from './test-support/recording-model.js'

let local: LocalLanguageModel
beforeAll(async () => {
  local = await tinyLocalModel()
})

type Arc = { question: string; choices: { text: string[]; label: string[] }; answerKey: string }

describe('acc_mutual_info', () => {
  test('argmax of log p(choice | context) − log p(choice | unconditional), from the model’s own scores', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lm-eval-mi-'))
    writeFileSync(
      join(dir, 'arc_mi.yaml'),
      [
        'task: arc_mi',
        'dataset_path: json',
        'dataset_kwargs:',
        '  data_files:',
        `    test: ${join(LM_EVAL_DATA, 'ai2_arc/ARC-Easy/test.jsonl')}`,
        'test_split: test',
        'output_type: multiple_choice',
        'doc_to_text: "Question: {{question}}\\nAnswer:"',
        'doc_to_target: "{{choices.label.index(answerKey)}}"',
        'doc_to_choice: "{{choices.text}}"',
        'metric_list:',
        '  - metric: acc',
        '  - metric: acc_mutual_info',
      ].join('\n'),
    )
    const m = new Recording(local)
    const r = await runTask(m, await readLmEvalTask(join(dir, 'arc_mi.yaml')))
    expect(r.metrics.map((x) => x.metric)).toEqual(['acc', 'acc_mutual_info'])
    const rows = fixtureRows('ai2_arc/ARC-Easy/test.jsonl') as Arc[]
    // Independently: each choice scored after the question, and after the unconditional context "\n"
    // (the harness's "" that its models fill with BOS/EOT), both with the target delimiter " " in front.
    const picks: number[] = []
    let differs = 0
    for (const d of rows) {
      const cond = await local.loglikelihood(
        d.choices.text.map((c) => ({ context: `Question: ${d.question}\nAnswer:`, continuation: ` ${c}` })),
      )
      const uncond = await local.loglikelihood(d.choices.text.map((c) => ({ context: '\n', continuation: ` ${c}` })))
      const mi = cond.map((s, i) => s.logprob - uncond[i]!.logprob)
      const pick = mi.indexOf(Math.max(...mi))
      const plain = cond.map((s) => s.logprob)
      if (plain.indexOf(Math.max(...plain)) !== pick) differs++
      picks.push(pick === d.choices.label.indexOf(d.answerKey) ? 1 : 0)
    }
    expect(m.ll.filter((x) => x.context === '\n').length).toBe(15)
    expect(m.ll.length).toBe(30)
    expect(r.records.map((x) => x.accMutualInfo)).toEqual(picks)
    expect(r.metrics[1]!.value).toBe(picks.reduce((a, b) => a + b, 0) / picks.length)
    // The unconditional scores change at least one pick here, so the metric is not plain acc.
    expect(differs).toBeGreaterThan(0)
  })
})
