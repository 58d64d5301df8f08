import { join } from 'node:path'
import { beforeAll, describe, expect, test } from 'vitest'
import type { LocalLanguageModel } from './local-model.js'
import { readLmEvalTask } from './lm-eval-task.js'
import { runTask } from './run-task.js'
import { LM_EVAL_DATA, LM_EVAL_FIXTURES, Recording, tinyLocalModel } from './test-support/recording-model.js'

let local: LocalLanguageModel
beforeAll(async () => {
  local = await tinyLocalModel()
})

/** Run an upstream task YAML on its local slice; the model's requests and the golds. */
async function run(yaml: string, numFewshot?: number) {
  const task = await readLmEvalTask(join(LM_EVAL_FIXTURES, yaml), {
    dataDir: LM_EVAL_DATA,
    ...(numFewshot !== undefined ? { numFewshot } : {}),
  })
  const m = new Recording(local)
  const r = await runTask(m, task)
  return { m, r, golds: r.records.map((x) => x.gold) }
}

describe("more of Marin's core tasks from their unchanged upstream YAML (expected requests written by hand)", () => {
  test('openbookqa: a column as doc_to_text, answerKey.lstrip() in the target template', async () => {
    const { m, golds } = await run('openbookqa/openbookqa.yaml')
    expect(m.ll.slice(0, 2)).toEqual([
      { context: 'A magnet will stick to', continuation: ' a wooden spoon' },
      { context: 'A magnet will stick to', continuation: ' an iron nail' },
    ])
    expect(golds).toEqual([1, 2])
  })

  test('boolq: a constant list of choices, a column target; validation split (no test split)', async () => {
    const { m, golds } = await run('super_glue/boolq/default.yaml')
    expect(m.ll.slice(0, 2)).toEqual([
      {
        context:
          'Tomato -- The tomato is the edible berry of a plant in the nightshade family.\n' +
          'Question: is a tomato a fruit?\nAnswer:',
        continuation: ' no',
      },
      {
        context:
          'Tomato -- The tomato is the edible berry of a plant in the nightshade family.\n' +
          'Question: is a tomato a fruit?\nAnswer:',
        continuation: ' yes',
      },
    ])
    expect(golds).toEqual([1, 0])
  })

  test('commonsense_qa: letters as choices, the answer letter as target, question.strip()', async () => {
    const { m, golds } = await run('commonsense_qa/default.yaml')
    expect(m.ll[0]).toEqual({
      context:
        'Question: Where would you keep milk cold?\nA. oven\nB. refrigerator\nC. garden\nD. closet\nE. desk\nAnswer:',
      continuation: ' A',
    })
    expect(m.ll.length).toBe(10)
    expect(golds).toEqual([1, 2])
  })

  test("copa: its Python doc_to_* functions have built-in equivalents (the harness's double space kept)", async () => {
    const { m, golds } = await run('super_glue/copa/default.yaml')
    expect(m.ll.slice(0, 2)).toEqual([
      { context: 'The man turned on the faucet therefore', continuation: '  the toilet filled with water.' },
      { context: 'The man turned on the faucet therefore', continuation: '  water flowed from the spout.' },
    ])
    expect(m.ll[4]).toEqual({ context: 'The road was wet because', continuation: '  it had rained.' })
    expect(golds).toEqual([1, 1, 0])
    // Few-shot: an example is the premise, the delimiter and the right choice.
    const fs = await run('super_glue/copa/default.yaml', 1)
    expect(fs.m.ll[0]!.context).toMatch(
      new RegExp(
        '^(My hands were cold therefore {2}i put on gloves\\.|The glass broke because {2}it fell on the floor\\.)' +
          '\\n\\nThe man turned on the faucet therefore$',
      ),
    )
  })

  test('wsc273: built-in process_docs, {% set %} and slices in templates, a rendered list as choices', async () => {
    const { m, golds } = await run('wsc273/default.yaml')
    expect(m.ll).toEqual([
      { context: 'The cat chased the mouse because the cat', continuation: '  was hungry.' },
      { context: 'The cat chased the mouse because the mouse', continuation: '  was hungry.' },
      { context: 'Mary thanked Jane because Mary', continuation: '  had helped her.' },
      { context: 'Mary thanked Jane because Jane', continuation: '  had helped her.' },
    ])
    expect(golds).toEqual([0, 1])
  })
})
