import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, test } from 'vitest'
import type { LocalLanguageModel } from './local-model.js'
import { FewshotDrawer } from './lm-eval-fewshot.js'
import { readLmEvalTask } from './lm-eval-task.js'
import { runTask } from './run-task.js'
import {
  LM_EVAL_DATA,
  LM_EVAL_FIXTURES,
  Recording,
  fixtureRows,
  pythonSampleCalls,
  tinyLocalModel,
} from './test-support/recording-model.js'

let local: LocalLanguageModel
beforeAll(async () => {
  local = await tinyLocalModel()
})

/** A task folder with sums.jsonl (five documents) and the given YAML files. */
function taskDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'lm-eval-fewshot-'))
  writeFileSync(
    join(dir, 'sums.jsonl'),
    [
      { q: '2+2', choices: ['4', '5'], label: 0 },
      { q: '3+3', choices: ['7', '6'], label: 1 },
      { q: '1+1', choices: ['2', '3'], label: 0 },
      { q: '5+5', choices: ['11', '10'], label: 1 },
      { q: '4+4', choices: ['8', '9'], label: 0 },
    ]
      .map((d) => JSON.stringify(d))
      .join('\n') + '\n',
  )
  for (const [name, body] of Object.entries(files)) writeFileSync(join(dir, name), body)
  return dir
}

const SUMS_MC = [
  'task: tiny_sums',
  'dataset_path: json',
  'dataset_kwargs:',
  '  data_files:',
  '    test: sums.jsonl',
  'test_split: test',
  'fewshot_split: test',
  'output_type: multiple_choice',
  'description: "Add the numbers.\\n\\n"',
  'doc_to_text: "Q: {{q}}"',
  'doc_to_target: label',
  'doc_to_choice: choices',
  'target_delimiter: " A: "',
  'fewshot_delimiter: "\\n###\\n"',
  'num_fewshot: 2',
].join('\n')

describe("the few-shot drawer against lm-evaluation-harness's own ContextSampler", () => {
  /** Draws the harness's samplers.py made over the fixture data (its script and commit are in the file). */
  const harness = JSON.parse(readFileSync(join(LM_EVAL_FIXTURES, 'harness-fewshot-draws.json'), 'utf8')) as Record<
    string,
    number[][]
  >
  const sums = [
    { q: '2+2', choices: ['4', '5'], label: 0 },
    { q: '3+3', choices: ['7', '6'], label: 1 },
    { q: '1+1', choices: ['2', '3'], label: 0 },
    { q: '5+5', choices: ['11', '10'], label: 1 },
    { q: '4+4', choices: ['8', '9'], label: 0 },
  ]
  const draws = (
    pool: Record<string, unknown>[],
    evals: Record<string, unknown>[],
    n: number,
    excludeEvalDoc: boolean,
    sampler: 'default' | 'first_n' = 'default',
  ) => {
    const d = new FewshotDrawer(
      {
        docs: pool,
        from: 'test',
        sampler,
        excludeEvalDoc,
        docToText: 'q',
        docToTarget: 'label',
        targetDelimiter: ' ',
        fewshotDelimiter: '\n\n',
      },
      1234,
    )
    return evals.map((e) => d.draw(n, e).map((x) => pool.indexOf(x)))
  }

  test('the same documents, in the same order, for each evaluated document', () => {
    const train = fixtureRows('ai2_arc/ARC-Easy/train.jsonl')
    expect(draws(train, fixtureRows('ai2_arc/ARC-Easy/test.jsonl'), 2, false)).toEqual(harness.arc_easy_2shot)
    expect(draws(sums, sums, 2, true)).toEqual(harness.sums_2shot_same_split)
    expect(draws(sums, sums, 2, true, 'first_n')).toEqual(harness.sums_2shot_first_n_same_split)
    expect(
      draws(
        fixtureRows('winogrande/winogrande_xl/train.jsonl'),
        fixtureRows('winogrande/winogrande_xl/validation.jsonl'),
        1,
        true,
      ),
    ).toEqual(harness.winogrande_1shot)
    expect(
      draws(fixtureRows('openai/gsm8k/main/train.jsonl'), fixtureRows('openai/gsm8k/main/test.jsonl'), 5, false),
    ).toEqual(harness.gsm8k_5shot)
  })
})

describe('few-shot contexts as lm-evaluation-harness builds them', () => {
  test('default sampler, few-shot split = test split: Random(1234).sample(pool, n+1), doc left out', async () => {
    // CPython's Random(1234).sample(range(5), 3), five calls: [3,0,4] [0,4,2] [0,4,1] [1,0,3] [0,2,3].
    // Each document drops itself from its draw and keeps the first two.
    expect(pythonSampleCalls(5, 3).slice(0, 5)).toEqual([
      [3, 0, 4],
      [0, 4, 2],
      [0, 4, 1],
      [1, 0, 3],
      [0, 2, 3],
    ])
    const dir = taskDir({ 'sums.yaml': SUMS_MC })
    const m = new Recording(local)
    const r = await runTask(m, await readLmEvalTask(join(dir, 'sums.yaml')))
    expect(r.samples).toBe(5)
    const contexts = [...new Set(m.ll.map((x) => x.context))]
    expect(contexts).toEqual([
      'Add the numbers.\n\nQ: 5+5 A: 10\n###\nQ: 4+4 A: 8\n###\nQ: 2+2',
      'Add the numbers.\n\nQ: 2+2 A: 4\n###\nQ: 4+4 A: 8\n###\nQ: 3+3',
      'Add the numbers.\n\nQ: 2+2 A: 4\n###\nQ: 4+4 A: 8\n###\nQ: 1+1',
      'Add the numbers.\n\nQ: 3+3 A: 6\n###\nQ: 2+2 A: 4\n###\nQ: 5+5',
      'Add the numbers.\n\nQ: 2+2 A: 4\n###\nQ: 1+1 A: 2\n###\nQ: 4+4',
    ])
    expect(m.ll.slice(0, 2).map((x) => x.continuation)).toEqual([' A: 4', ' A: 5'])
  })

  test('first_n sampler with inline samples and fewshot_config overrides; num_fewshot from the options', async () => {
    const dir = taskDir({
      'gen.yaml': [
        'task: tiny_sums_gen',
        'dataset_path: json',
        'dataset_kwargs:',
        '  data_files:',
        '    test: sums.jsonl',
        'test_split: test',
        'output_type: generate_until',
        'description: "Solve {{q}}.\\n\\n"',
        'doc_to_text: "Q: {{q}}\\nA:"',
        'doc_to_target: "{{choices[label]}}"',
        'num_fewshot: 1',
        'fewshot_config:',
        '  sampler: first_n',
        '  target_delimiter: " => "',
        '  doc_to_target: "{{why}}, so {{a}}"',
        '  samples:',
        '    - {q: "7+7", a: "14", why: "7 and 7 make 14"}',
        '    - {q: "9+1", a: "10", why: "9 and 1 make 10"}',
        '    - {q: "6+2", a: "8", why: "6 and 2 make 8"}',
        'generation_kwargs:',
        '  until: ["\\n\\n"]',
        '  max_gen_toks: 3',
      ].join('\n'),
    })
    const m = new Recording(local)
    await runTask(m, await readLmEvalTask(join(dir, 'gen.yaml'), { numFewshot: 2 }), { limit: 2 })
    expect(m.gen).toEqual([
      {
        context:
          'Solve 2+2.\n\nQ: 7+7\nA: => 7 and 7 make 14, so 14\n\nQ: 9+1\nA: => 9 and 1 make 10, so 10\n\nQ: 2+2\nA:',
        maxTokens: 3,
      },
      {
        context:
          'Solve 3+3.\n\nQ: 7+7\nA: => 7 and 7 make 14, so 14\n\nQ: 9+1\nA: => 9 and 1 make 10, so 10\n\nQ: 3+3\nA:',
        maxTokens: 3,
      },
    ])
  })

  test('upstream arc_easy.yaml, num_fewshot 2: examples drawn from its train split as the harness does', async () => {
    const train = fixtureRows('ai2_arc/ARC-Easy/train.jsonl')
    const testRows = fixtureRows('ai2_arc/ARC-Easy/test.jsonl')
    expect(train.length).toBe(7)
    // test_split is "test" and there is no fewshot_split: examples come from training_split, nothing is left out,
    // so each document takes CPython's next Random(1234).sample(range(7), 2).
    type Arc = { question: string; choices: { text: string[]; label: string[] }; answerKey: string }
    const shot = (d: Arc) =>
      `Question: ${d.question}\nAnswer: ${d.choices.text[d.choices.label.indexOf(d.answerKey)]}\n\n`
    const expected = testRows.map(
      (d, i) =>
        pythonSampleCalls(7, 2)
          [i]!.map((j) => shot(train[j] as Arc))
          .join('') + `Question: ${(d as Arc).question}\nAnswer:`,
    )
    expect(expected[0]).toBe(
      'Question: What do bees make?\nAnswer: honey\n\n' +
        'Question: Which planet do we live on?\nAnswer: Earth\n\n' +
        'Question: Which of these is a gas at room temperature?\nAnswer:',
    )
    const task = await readLmEvalTask(join(LM_EVAL_FIXTURES, 'arc/arc_easy.yaml'), {
      dataDir: LM_EVAL_DATA,
      numFewshot: 2,
    })
    const m = new Recording(local)
    const r = await runTask(m, task)
    expect([...new Set(m.ll.map((x) => x.context))]).toEqual(expected)
    expect(m.ll[0]!.continuation).toBe(' iron')
    expect(r.records.map((x) => x.gold)).toEqual([1, 0, 2, 3])
    // Another seed draws other examples.
    const m2 = new Recording(local)
    await runTask(
      m2,
      await readLmEvalTask(join(LM_EVAL_FIXTURES, 'arc/arc_easy.yaml'), {
        dataDir: LM_EVAL_DATA,
        numFewshot: 2,
        fewshotSeed: 7,
      }),
    )
    expect([...new Set(m2.ll.map((x) => x.context))]).not.toEqual(expected)
  })

  test('winogrande, hellaswag (upstream, no test_split): multiple-input examples, process_docs on train', async () => {
    // Neither sets test_split or fewshot_split, so the harness draws n + 1 from the training split and leaves out
    // the evaluated document: Random(1234).sample(range(3), 2) gives [1, 0] then [0, 2]; each keeps the first.
    expect(pythonSampleCalls(3, 2).slice(0, 2)).toEqual([
      [1, 0],
      [0, 2],
    ])
    const wino = await readLmEvalTask(join(LM_EVAL_FIXTURES, 'winogrande/default.yaml'), {
      dataDir: LM_EVAL_DATA,
      numFewshot: 1,
    })
    const m = new Recording(local)
    await runTask(m, wino)
    expect(m.ll).toEqual([
      {
        context:
          'The dog chased the cat until the cat climbed a tree.\n\n' +
          'The trophy did not fit in the suitcase because the trophy',
        continuation: ' was too big.',
      },
      {
        context:
          'The dog chased the cat until the cat climbed a tree.\n\n' +
          'The trophy did not fit in the suitcase because the suitcase',
        continuation: ' was too big.',
      },
      {
        context:
          'Anna lent Beth a book because Anna had finished reading it.\n\nThe cup fell off the table because the cup',
        continuation: ' was wobbly.',
      },
      {
        context:
          'Anna lent Beth a book because Anna had finished reading it.\n\nThe cup fell off the table because the table',
        continuation: ' was wobbly.',
      },
    ])
    const hs = await readLmEvalTask(join(LM_EVAL_FIXTURES, 'hellaswag/hellaswag.yaml'), {
      dataDir: LM_EVAL_DATA,
      numFewshot: 1,
    })
    const h = new Recording(local)
    await runTask(h, hs)
    const contexts = [...new Set(h.ll.map((x) => x.context))]
    expect(contexts[0]).toBe(
      'Riding bike: A boy puts on a helmet. He rides down the street.\n\n' +
        'Washing dishes: A man fills the sink with water. He',
    )
    // HellaSwag's clean-up applies to the example: " [title]" becomes ". ", then double spaces close up.
    expect(
      contexts[1]!.startsWith('Painting fence: A woman dips a brush in white paint. She paints the fence. slowly.\n\n'),
    ).toBe(true)
  })

  test('num_fewshot override: applies unless the YAML sets 0; zero-shot needs no training data', async () => {
    const dir = taskDir({
      'zero.yaml': SUMS_MC.replace('num_fewshot: 2', 'num_fewshot: 0'),
      'none.yaml': SUMS_MC.replace('num_fewshot: 2', ''),
    })
    const zero = await readLmEvalTask(join(dir, 'zero.yaml'), { numFewshot: 3 })
    expect(zero.numFewshot).toBe(0)
    const m = new Recording(local)
    await runTask(m, zero, { limit: 1 })
    expect(m.ll[0]!.context).toBe('Add the numbers.\n\nQ: 2+2')
    expect((await readLmEvalTask(join(dir, 'none.yaml'))).numFewshot).toBe(0)
    expect((await readLmEvalTask(join(dir, 'none.yaml'), { numFewshot: 1 })).numFewshot).toBe(1)
    // arc_easy zero-shot reads no train split; its lambada sibling has none and stays runnable.
    const lambada = await readLmEvalTask(join(LM_EVAL_FIXTURES, 'lambada/lambada_openai.yaml'), {
      dataDir: LM_EVAL_DATA,
    })
    expect(lambada.numFewshot).toBe(0)
  })

  test('few-shot problems are errors naming the file and the fix', async () => {
    // PIQA's validation split alone: zero-shot runs, few-shot needs its training split.
    const validationOnly = mkdtempSync(join(tmpdir(), 'lm-eval-valonly-'))
    mkdirSync(join(validationOnly, 'piqa'))
    copyFileSync(join(LM_EVAL_DATA, 'piqa/validation.jsonl'), join(validationOnly, 'piqa/validation.jsonl'))
    await readLmEvalTask(join(LM_EVAL_FIXTURES, 'piqa/piqa.yaml'), { dataDir: validationOnly })
    const dir = taskDir({
      'many.yaml': SUMS_MC.replace('num_fewshot: 2', 'num_fewshot: 5'),
      'sampler.yaml': `${SUMS_MC}\nfewshot_config:\n  sampler: balanced\n`,
    })
    await expect(readLmEvalTask(join(dir, 'many.yaml'))).rejects.toMatchObject({
      code: 'BAD_CONFIG',
      message: expect.stringMatching(/many\.yaml: num_fewshot: 5 .*6 documents.*"test".*has 5/),
    })
    await expect(readLmEvalTask(join(dir, 'sampler.yaml'))).rejects.toMatchObject({
      code: 'BAD_CONFIG',
      message: expect.stringMatching(/sampler\.yaml: fewshot_config\.sampler: balanced.*default, first_n/),
    })
    await expect(
      readLmEvalTask(join(LM_EVAL_FIXTURES, 'piqa/piqa.yaml'), { dataDir: validationOnly, numFewshot: 1 }),
    ).rejects.toMatchObject({
      code: 'BAD_CONFIG',
      message: expect.stringMatching(/piqa\.yaml: no local data .*few-shot.*piqa\/train\.jsonl/s),
    })
  })
})
