import { cpSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { trainBpe } from '@marin/datakit'
import { Gpt2LM, initBackend } from '@marin/levanter'
import { Dataset, ZephyrContext } from '@marin/zephyr'
import { beforeAll, describe, expect, test } from 'vitest'
import { resolveTasks } from './evaluate.js'
import { readLmEvalTask } from './lm-eval-task.js'
import { LocalLanguageModel } from './local-model.js'
import { runTask } from './run-task.js'
import { LM_EVAL_DATA, LM_EVAL_FIXTURES, Recording, fixtureRows } from './test-support/recording-model.js'

const FIX = LM_EVAL_FIXTURES
const DATA = LM_EVAL_DATA
const jsonl = fixtureRows

let local: LocalLanguageModel
const fresh = () => new Recording(local)

beforeAll(async () => {
  await initBackend()
  const text = [...jsonl('ai2_arc/ARC-Easy/test.jsonl').map((d) => String(d.question)), 'the cat sat on the mat']
  const tok = trainBpe(text, { vocabSize: 300 })
  local = new LocalLanguageModel(new Gpt2LM({ vocabSize: 300, seqLen: 128, dModel: 16, nLayers: 1, nHeads: 2 }, 5), tok)
})

describe('lm-evaluation-harness task YAML', () => {
  test('arc_easy.yaml (unchanged upstream) runs on a local JSONL slice: prompts, choices, gold, acc', async () => {
    const task = await readLmEvalTask(join(FIX, 'arc/arc_easy.yaml'), { dataDir: DATA })
    expect(task.name).toBe('arc_easy')
    const m = fresh()
    const r = await runTask(m, task)
    expect(r.samples).toBe(4)
    expect(r.metrics.map((x) => x.metric)).toEqual(['acc', 'acc_norm'])
    // lm-eval's requests: context "Question: …\nAnswer:", continuation " " + choice.
    expect(m.ll[0]).toEqual({
      context: 'Question: Which of these is a gas at room temperature?\nAnswer:',
      continuation: ' iron',
    })
    expect(m.ll[1]!.continuation).toBe(' oxygen')
    expect(m.ll.length).toBe(4 + 3 + 4 + 4)
    expect(r.records.map((x) => x.gold)).toEqual([1, 0, 2, 3])
    for (const rec of r.records as { loglikelihoods: number[]; pred: number; gold: number; acc: number }[]) {
      const best = rec.loglikelihoods.indexOf(Math.max(...rec.loglikelihoods))
      expect(rec.pred).toBe(best)
      expect(rec.acc).toBe(best === rec.gold ? 1 : 0)
    }
    const acc = r.metrics[0]!.value
    expect(acc).toBe((r.records as { acc: number }[]).reduce((a, x) => a + x.acc, 0) / 4)
  })

  test('arc_challenge.yaml includes arc_easy.yaml; data_files override reads Parquet', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lm-eval-parquet-'))
    const rows = jsonl('piqa/validation.jsonl')
    await new ZephyrContext({ inProcess: true, progress: 'off' }).execute(
      Dataset.fromList(rows).writeParquet(join(dir, 'piqa-{shard}.parquet')),
    )
    const piqa = await readLmEvalTask(join(FIX, 'piqa/piqa.yaml'), { dataFiles: join(dir, 'piqa-0.parquet') })
    const m = fresh()
    const r = await runTask(m, piqa)
    expect(r.samples).toBe(3)
    expect(m.ll[0]).toEqual({
      context: 'Question: To dry wet hands,\nAnswer:',
      continuation: ' rub them with a towel.',
    })
    expect(r.records.map((x) => x.gold)).toEqual([0, 1, 0])

    const ch = await readLmEvalTask(join(FIX, 'arc/arc_challenge.yaml'), { dataDir: DATA })
    expect(ch.name).toBe('arc_challenge')
    const m2 = fresh()
    await runTask(m2, ch)
    expect(m2.ll[0]!.context).toBe('Question: Why does ice float on water?\nAnswer:')
  })

  test('lambada_openai.yaml: loglikelihood with perplexity and acc (is_greedy)', async () => {
    const task = await readLmEvalTask(join(FIX, 'lambada/lambada_openai.yaml'), { dataDir: DATA })
    const m = fresh()
    const r = await runTask(m, task)
    expect(m.ll[0]).toEqual({ context: 'she opened the window and the cold air came into the', continuation: ' room' })
    const scores = await local.loglikelihood(m.ll)
    const ppl = Math.exp(-scores.reduce((a, s) => a + s.logprob, 0) / scores.length)
    expect(r.metrics.find((x) => x.metric === 'perplexity')!.value).toBeCloseTo(ppl, 9)
    const acc = scores.filter((s) => s.greedy).length / scores.length
    expect(r.metrics.find((x) => x.metric === 'acc')!.value).toBe(acc)
  })

  test('hellaswag.yaml: its process_docs (a Python !function) has a built-in equivalent', async () => {
    const task = await readLmEvalTask(join(FIX, 'hellaswag/hellaswag.yaml'), { dataDir: DATA })
    const m = fresh()
    const r = await runTask(m, task)
    expect(m.ll[0]).toEqual({
      context: 'Washing dishes: A man fills the sink with water. He',
      continuation: ' washes the plates. with soap.',
    })
    expect(r.records.map((x) => x.gold)).toEqual([0, 1])
  })

  test('winogrande default.yaml: multiple inputs (one context per option, one continuation)', async () => {
    const task = await readLmEvalTask(join(FIX, 'winogrande/default.yaml'), { dataDir: DATA })
    const m = fresh()
    const r = await runTask(m, task)
    expect(m.ll.slice(0, 2)).toEqual([
      { context: 'The trophy did not fit in the suitcase because the trophy', continuation: ' was too big.' },
      { context: 'The trophy did not fit in the suitcase because the suitcase', continuation: ' was too big.' },
    ])
    expect(r.records.map((x) => x.gold)).toEqual([0, 1])
    expect(r.metrics.map((x) => x.metric)).toEqual(['acc'])
  })

  test('generate_until with exact_match; loglikelihood_rolling with bits_per_byte (YAML written here)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lm-eval-gen-'))
    writeFileSync(join(dir, 'qa.jsonl'), '{"q": "the cat sat on the", "a": "mat"}\n{"q": "the", "a": "zzz"}\n')
    writeFileSync(
      join(dir, 'qa.yaml'),
      [
        'task: tiny_qa',
        'dataset_path: json',
        'dataset_kwargs:',
        '  data_files:',
        '    test: qa.jsonl',
        'test_split: test',
        'output_type: generate_until',
        'doc_to_text: "Q: {{q}}\\nA:"',
        'doc_to_target: "{{a}}"',
        'generation_kwargs:',
        '  until: ["\\n", "."]',
        '  max_gen_toks: 5',
        'metric_list:',
        '  - metric: exact_match',
        '    ignore_case: true',
      ].join('\n'),
    )
    const gen = await readLmEvalTask(join(dir, 'qa.yaml'))
    const m = fresh()
    const r = await runTask(m, gen)
    expect(m.gen[0]).toEqual({ context: 'Q: the cat sat on the\nA:', maxTokens: 5 })
    const outs = await local.generate(m.gen)
    const preds = outs.map((o) => o.split(/\n|\./)[0]!.trim())
    expect(r.records.map((x) => x.prediction)).toEqual(preds)
    const em = preds.filter((p, i) => p.toLowerCase() === ['mat', 'zzz'][i]).length / 2
    expect(r.metrics).toEqual([{ metric: 'exact_match', value: em, stderr: expect.any(Number) }])

    writeFileSync(join(dir, 'pages.jsonl'), '{"page": "the cat sat on the mat"}\n')
    writeFileSync(
      join(dir, 'wiki.yaml'),
      'task: tiny_wiki\noutput_type: loglikelihood_rolling\ndataset_path: json\n' +
        'dataset_kwargs:\n  data_files: pages.jsonl\ntest_split: train\ndoc_to_text: ""\ndoc_to_target: "{{page}}"\n' +
        'metric_list:\n  - metric: word_perplexity\n  - metric: byte_perplexity\n  - metric: bits_per_byte\n',
    )
    const roll = await runTask(fresh(), await readLmEvalTask(join(dir, 'wiki.yaml')))
    const [s] = await local.loglikelihood([{ context: '\n', continuation: 'the cat sat on the mat' }])
    const bpb = -s!.logprob / Math.LN2 / 22
    expect(roll.metrics.map((x) => x.metric)).toEqual(['word_perplexity', 'byte_perplexity', 'bits_per_byte'])
    expect(roll.metrics[2]!.value).toBeCloseTo(bpb, 9)
    expect(roll.metrics[1]!.value).toBeCloseTo(2 ** bpb, 9)
    expect(roll.metrics[0]!.value).toBeCloseTo(Math.exp(-s!.logprob / 6), 9)
  })

  test('bad task files and missing data are errors naming the file, the field and the fix', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lm-eval-bad-'))
    const write = (name: string, body: string) => {
      writeFileSync(join(dir, name), body)
      return join(dir, name)
    }
    await expect(readLmEvalTask(join(FIX, 'arc/arc_easy.yaml'))).rejects.toMatchObject({
      code: 'BAD_CONFIG',
      message: expect.stringMatching(/arc_easy\.yaml.*no local data.*ai2_arc\/ARC-Easy\/test\.jsonl.*--data-dir/s),
    })
    write('d.jsonl', '{"x": "a"}\n')
    const base = 'task: t\ndataset_path: json\ndataset_kwargs:\n  data_files: d.jsonl\ntest_split: train\n'
    await expect(
      readLmEvalTask(write('m.yaml', base + 'doc_to_text: "{{x}}"\nmetric_list:\n  - metric: bleu\n')),
    ).rejects.toMatchObject({ code: 'BAD_CONFIG', message: expect.stringMatching(/m\.yaml: metric_list.*bleu/) })
    await expect(
      readLmEvalTask(write('f.yaml', base + 'doc_to_text: !function utils.doc_to_text\n')),
    ).rejects.toMatchObject({
      code: 'BAD_CONFIG',
      message: expect.stringMatching(/f\.yaml: doc_to_text.*utils\.doc_to_text/),
    })
    await expect(readLmEvalTask(write('o.yaml', base + 'output_type: ranking\n'))).rejects.toMatchObject({
      code: 'BAD_CONFIG',
      message: expect.stringMatching(/o\.yaml: output_type/),
    })
  })
})

describe('suites', () => {
  test('"core" names the task set; each task is found by name in the tasks directory', async () => {
    const tasks = await resolveTasks(['core'], { lmEval: { tasksDir: FIX, dataDir: DATA } })
    expect(tasks.map((t) => t.name)).toEqual([
      'arc_easy',
      'arc_challenge',
      'hellaswag',
      'lambada_openai',
      'piqa',
      'winogrande',
    ])
    const one = await resolveTasks([join(FIX, 'arc/arc_easy.yaml'), 'lambada_openai'], {
      lmEval: { tasksDir: FIX, dataDir: DATA },
    })
    expect(one.map((t) => t.name)).toEqual(['arc_easy', 'lambada_openai'])
    // With --num-fewshot every core task finds its few-shot split (train; lambada has only test) and runs.
    const shots = await resolveTasks(['core'], { lmEval: { tasksDir: FIX, dataDir: DATA, numFewshot: 1 } })
    for (const t of shots) {
      const m = fresh()
      const r = await runTask(m, t, { limit: 1 })
      expect(r.samples, t.name).toBe(1)
      expect(m.ll[0]!.context, t.name).toContain('\n\n')
    }
    await expect(resolveTasks(['core'], { lmEval: { dataDir: DATA } })).rejects.toMatchObject({
      code: 'BAD_CONFIG',
      message: expect.stringContaining('--lm-eval-tasks'),
    })
  })
})

describe("marin_core: Marin's core tasks with their few-shot counts", () => {
  test('each task with its num_fewshot (hellaswag twice, by alias); a run-wide --num-fewshot wins', async () => {
    // Ten-shot tasks need ten training documents (eleven where the evaluated one is left out): pad the slices.
    const data = mkdtempSync(join(tmpdir(), 'lm-eval-core-data-'))
    cpSync(DATA, data, { recursive: true })
    const pad = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name)
        if (e.isDirectory()) pad(p)
        else if (e.name === 'train.jsonl') {
          const rows = readFileSync(p, 'utf8').trim().split('\n')
          writeFileSync(p, Array.from({ length: 11 }, (_, i) => rows[i % rows.length]).join('\n') + '\n')
        }
      }
    }
    pad(data)
    const tasks = await resolveTasks(['marin_core'], { lmEval: { tasksDir: FIX, dataDir: data } })
    expect(tasks.map((t) => [t.name, (t as { numFewshot: number }).numFewshot])).toEqual([
      ['arc_easy', 10],
      ['arc_challenge', 10],
      ['boolq', 10],
      ['commonsense_qa', 10],
      ['copa', 0],
      ['hellaswag_0shot', 0],
      ['hellaswag_10shot', 10],
      ['lambada_openai', 0],
      ['openbookqa', 0],
      ['piqa', 10],
      ['wsc273', 0],
      ['winogrande', 0],
    ])
    const boolq = tasks.find((t) => t.name === 'boolq')!
    const m = fresh()
    await runTask(m, boolq, { limit: 1 })
    expect(m.ll[0]!.context.split('\nAnswer: ').length).toBe(11)
    const all1 = await resolveTasks(['marin_core'], { lmEval: { tasksDir: FIX, dataDir: data, numFewshot: 1 } })
    expect(all1.map((t) => (t as { numFewshot: number }).numFewshot)).toEqual(Array(12).fill(1))
  })
})
