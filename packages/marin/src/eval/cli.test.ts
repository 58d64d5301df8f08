import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { trainBpe } from '@marin/datakit'
import { openStore } from '@marin/finestore'
import { Gpt2LM, exportHf, initBackend } from '@marin/levanter'
import { beforeAll, describe, expect, test } from 'vitest'
import { runCli } from '../cli/program.js'
import { Executor } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { evalStep } from './eval-step.js'
import { artifactRef, parseStepArtifacts } from '../executor/artifacts.js'
import { buildReport } from '../report/build.js'
import { LocalLanguageModel } from './local-model.js'
import { readTaskFile } from './task.js'
import { runTask } from './run-task.js'

const cfg = { vocabSize: 260, seqLen: 32, dModel: 16, nLayers: 1, nHeads: 2 }
let dir: string, ckpt: string, taskFile: string
const lines = ['a b c d e', 'x y z', 'the cat sat on the mat']

async function cli(argv: string[], prefix: string) {
  const out: string[] = [],
    err: string[] = []
  const code = await runCli(argv, { out: (l) => out.push(l), err: (l) => err.push(l), env: { MARIN_PREFIX: prefix } })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

beforeAll(async () => {
  await initBackend()
  dir = mkdtempSync(join(tmpdir(), 'eval-cli-'))
  ckpt = join(dir, 'hf')
  const tok = trainBpe(lines, { vocabSize: 260 })
  await exportHf(new Gpt2LM(cfg, 3), ckpt)
  writeFileSync(join(ckpt, 'tokenizer.json'), JSON.stringify(tok.toJSON()))
  taskFile = join(dir, 'toy.jsonl')
  writeFileSync(
    taskFile,
    lines.map((l, i) => JSON.stringify({ context: l, choices: [' q', ' r', ' s'], gold: i })).join('\n') + '\n',
  )
})

describe('marin eval', () => {
  test('evaluates a checkpoint folder on a task file, stores and prints JSON equal to in-process scoring', async () => {
    const prefix = join(dir, 'prefix')
    const r = await cli(
      ['eval', '--model-checkpoint', ckpt, '--tasks', `${taskFile},brown_cloze`, '--size', '5', '--json'],
      prefix,
    )
    expect(r.err).toBe('')
    expect(r.code).toBe(0)
    const json = JSON.parse(r.out)
    expect(json.ref).toBe('eval/results@1')
    expect(json.tasks.brown_cloze.samples).toBe(5)
    const { importHf } = await import('@marin/levanter')
    const { BpeTokenizer } = await import('@marin/datakit')
    const local = await runTask(
      new LocalLanguageModel(await importHf(ckpt), await BpeTokenizer.load(join(ckpt, 'tokenizer.json'))),
      await readTaskFile(taskFile),
    )
    expect(json.tasks.toy.metrics.acc.value).toBeCloseTo(local.metrics[0]!.value, 10)
    const store = await openStore({ url: join(prefix, 'store') })
    expect(JSON.parse(await (await store.open('eval/results@1')).readText('summary.json')).tasks.toy.samples).toBe(3)
  })

  test('--endpoint evaluates over HTTP (marin serve) with the same scores; --no-store stores nothing', async () => {
    const { importHf } = await import('@marin/levanter')
    const { BpeTokenizer } = await import('@marin/datakit')
    const { startServer } = await import('../serve/server.js')
    const keyFile = join(dir, 'key')
    writeFileSync(keyFile, 'sekrit\n')
    const server = await startServer({
      model: await importHf(ckpt),
      tokenizer: await BpeTokenizer.load(join(ckpt, 'tokenizer.json')),
      name: 'toy',
      port: 0,
      apiKey: 'sekrit',
    })
    try {
      const prefix = join(dir, 'p-http')
      const viaHttp = await cli(
        [
          'eval',
          '--endpoint',
          `${server.url}/v1`,
          '--model',
          'toy',
          '--api-key-file',
          keyFile,
          '--tasks',
          taskFile,
          '--no-store',
          '--json',
        ],
        prefix,
      )
      expect(viaHttp.code).toBe(0)
      const local = await cli(['eval', '--model-checkpoint', ckpt, '--tasks', taskFile, '--no-store', '--json'], prefix)
      const h = JSON.parse(viaHttp.out),
        l = JSON.parse(local.out)
      expect(h.ref).toBeNull()
      expect(h.tasks.toy.metrics.acc.value).toBe(l.tasks.toy.metrics.acc.value)
      expect(
        await cli(['eval', '--endpoint', `${server.url}/v1`, '--model', 'toy', '--tasks', taskFile], prefix),
      ).toMatchObject({ code: 1, err: expect.stringMatching(/HTTP 401/) })
    } finally {
      await server.close({ graceMs: 0 })
    }
  })

  test('exports built-in tasks that read back unchanged', async () => {
    const out = join(dir, 'tasks')
    const r = await cli(['eval', '--export-tasks', out, '--tasks', 'brown_cloze', '--size', '7'], join(dir, 'p2'))
    expect(r.code).toBe(0)
    expect((await readTaskFile(join(out, 'brown_cloze.jsonl'))).items).toHaveLength(7)
  })

  test('runs the lm-evaluation-harness core suite from --lm-eval-tasks with --data-dir', async () => {
    const fix = fileURLToPath(new URL('./fixtures/lm-eval/', import.meta.url))
    const args = ['eval', '--model-checkpoint', ckpt, '--tasks', 'core', '--lm-eval-tasks', fix, '--no-store', '--json']
    const r = await cli([...args, '--data-dir', join(fix, 'data')], join(dir, 'p-lm'))
    expect(r.err).toBe('')
    expect(r.code).toBe(0)
    const json = JSON.parse(r.out)
    expect(Object.keys(json.tasks)).toEqual([
      'arc_easy',
      'arc_challenge',
      'hellaswag',
      'lambada_openai',
      'piqa',
      'winogrande',
    ])
    expect(json.tasks.arc_easy).toMatchObject({ kind: 'multiple_choice', samples: 4 })
    expect(Object.keys(json.tasks.lambada_openai.metrics)).toEqual(['perplexity', 'acc'])
    const missing = await cli(args, join(dir, 'p-lm'))
    expect(missing.code).toBe(2)
    expect(missing.err).toMatch(/arc_easy\.yaml: no local data .*--data-dir/)
  })

  test('--num-fewshot and --fewshot-seed build lm-eval few-shot contexts; the stored config records them', async () => {
    const fix = fileURLToPath(new URL('./fixtures/lm-eval/', import.meta.url))
    const prefix = join(dir, 'p-fs')
    const base = [
      'eval',
      '--model-checkpoint',
      ckpt,
      '--tasks',
      join(fix, 'arc/arc_easy.yaml'),
      '--data-dir',
      join(fix, 'data'),
    ]
    const r = await cli([...base, '--num-fewshot', '2', '--json'], prefix)
    expect(r.err).toBe('')
    expect(r.code).toBe(0)
    const store = await openStore({ url: join(prefix, 'store') })
    const first = (await (await store.open('eval/results@1')).readText('samples/arc_easy.jsonl')).split('\n')[0]!
    // CPython's Random(1234).sample(range(7), 2) first gives [6, 3]: the 7th and 4th training questions.
    expect(JSON.parse(first).context).toBe(
      'Question: What do bees make?\nAnswer: honey\n\nQuestion: Which planet do we live on?\nAnswer: Earth\n\n' +
        'Question: Which of these is a gas at room temperature?\nAnswer:',
    )
    const v = await store.open('eval/results@1')
    expect(v.manifest.config).toMatchObject({ numFewshot: 2, fewshotSeed: 1234 })
    const other = await cli([...base, '--num-fewshot', '2', '--fewshot-seed', '7', '--json'], prefix)
    expect(other.code).toBe(0)
    const seeded = (await (await store.open('eval/results@2')).readText('samples/arc_easy.jsonl')).split('\n')[0]!
    expect(JSON.parse(seeded).context).not.toBe(JSON.parse(first).context)
    expect((await cli([...base, '--num-fewshot', 'two'], prefix)).code).toBe(2)
  })

  test('bad usage exits 2 and names the problem', async () => {
    const p = join(dir, 'p3')
    expect(await cli(['eval', '--tasks', 'brown_cloze'], p)).toMatchObject({
      code: 2,
      err: expect.stringMatching(/exactly one of --model-checkpoint/),
    })
    expect(await cli(['eval', '--model-checkpoint', ckpt, '--tasks', 'nope'], p)).toMatchObject({
      code: 2,
      err: expect.stringMatching(/task "nope" is not built in/),
    })
    expect(await cli(['eval', '--model-checkpoint', ckpt, '--tasks', join(dir, 'none.jsonl')], p)).toMatchObject({
      code: 2,
      err: expect.stringMatching(/none\.jsonl: cannot read it/),
    })
    expect(await cli(['eval', '--model-checkpoint', join(dir, 'nowhere'), '--tasks', taskFile], p)).toMatchObject({
      code: 2,
      err: expect.stringMatching(/--model-checkpoint .*nowhere: /),
    })
    expect((await cli(['eval', '--limit', 'x'], p)).code).toBe(2)
  })

  test('as an executor step: lm-evaluation-harness tasks by name from lmEvalTasks with dataDir', async () => {
    const fix = fileURLToPath(new URL('./fixtures/lm-eval/', import.meta.url))
    const prefix = join(dir, 'p5')
    const s = evalStep(
      'eval-lm',
      {
        checkpoint: ckpt,
        tasks: ['arc_easy', 'lambada_openai'],
        lmEvalTasks: fix,
        dataDir: join(fix, 'data'),
        numFewshot: 1,
      },
      { prefix },
    )
    await new Executor({ prefix, out: () => {} }).run(new Experiment({ name: 'eval-lm-exp', steps: [s] }))
    const store = await openStore({ url: join(prefix, 'store') })
    const summary = JSON.parse(await (await store.open('eval/eval-lm')).readText('summary.json'))
    expect(summary.tasks.arc_easy).toMatchObject({ kind: 'multiple_choice', samples: 4 })
    expect(summary.tasks.lambada_openai).toMatchObject({ kind: 'loglikelihood', samples: 3 })
    // One example from the training split before each ARC question (CPython's Random(1234).sample(range(7), 1): 6).
    const arc = (await (await store.open('eval/eval-lm')).readText('samples/arc_easy.jsonl')).split('\n')[0]!
    expect(JSON.parse(arc).context).toBe(
      'Question: What do bees make?\nAnswer: honey\n\nQuestion: Which of these is a gas at room temperature?\nAnswer:',
    )
  })

  test('as an executor step: results in the step output and in finestore', async () => {
    const prefix = join(dir, 'p4')
    const s = evalStep('eval-toy', { checkpoint: ckpt, tasks: [taskFile], limit: 2 }, { prefix })
    await new Executor({ prefix, out: () => {} }).run(new Experiment({ name: 'eval-exp', steps: [s] }))
    const store = await openStore({ url: join(prefix, 'store') })
    const summary = JSON.parse(await (await store.open('eval/eval-toy')).readText('summary.json'))
    expect(summary.tasks.toy.samples).toBe(2)
    const { readdirSync } = await import('node:fs')
    const outDir = readdirSync(prefix).find((d) => d.startsWith('eval-toy'))!
    expect(JSON.parse(readFileSync(join(prefix, outDir, 'results.json'), 'utf8'))).toMatchObject({
      ref: 'eval/eval-toy@1',
      tasks: { toy: { samples: 2 } },
    })
    // artifacts.json names the stored results, so dependents and the report find them.
    const listed = readFileSync(join(prefix, outDir, 'artifacts.json'), 'utf8')
    expect(parseStepArtifacts(listed, 'artifacts.json').artifacts).toEqual([artifactRef('eval/eval-toy', 1)])
    const { data } = await buildReport('eval-exp', prefix)
    expect(data.samples.length).toBeGreaterThan(0)
    expect(data.samples[0]!.source).toBe('eval-toy: toy')
  })
})
