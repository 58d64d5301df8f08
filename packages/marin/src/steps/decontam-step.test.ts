import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { openDataset } from '@marin/datakit'
import { configureLogging } from '@marin/rigging'
import { ParquetReader } from '@marin/zephyr'
import { brownSentences } from '../eval/brown-tasks.js'
import { readLmEvalTask } from '../eval/lm-eval-task.js'
import { Executor } from '../executor/executor.js'
import { Experiment } from '../executor/experiment.js'
import { topoSort } from '../executor/graph.js'
import { computeVersions } from '../executor/version.js'
import { ingestStep } from './datakit-steps.js'
import { decontaminateStep, evalTaskTexts } from './decontam-step.js'

const LM_EVAL = resolve(import.meta.dirname, '../eval/fixtures/lm-eval')
let root: string
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'marin-decontam-step-'))
  configureLogging({ destination: { write: () => {} }, pretty: false })
})
afterAll(() => rmSync(root, { recursive: true, force: true }))

test('decontaminateStep removes documents sharing an n-gram with each kind of eval task, per task', async () => {
  // A held-out Brown sentence (brown_bpb's pool), an item of a JSONL task, and a boolq passage (lm-eval YAML,
  // whose doc_to_decontamination_query is the passage).
  const brown = brownSentences('out').find((s) => s.length >= 60 && s.length <= 160 && s.split(' ').length >= 12)!
  const taskFile = join(root, 'harbor_qa.jsonl')
  writeFileSync(
    taskFile,
    `${JSON.stringify({ context: 'The ferry leaves the northern harbor every morning at', answer: 'seven' })}\n` +
      `${JSON.stringify({ context: 'Lighthouse keepers on the outer island rotate every', answer: 'month' })}\n`,
  )
  const clean = Array.from(
    { length: 12 },
    (_, i) =>
      `Clean document ${i} describes quarry number ${i} where granite blocks are cut, polished and ` +
      `shipped inland by rail car ${i * 3}.`,
  )
  const docs = [
    ...clean.map((text, i) => ({ id: `clean-${i}`, text })),
    { id: 'planted-brown', text: `A reader once wrote that ${brown} Nothing else here is from the corpus.` },
    { id: 'planted-jsonl', text: 'Timetable: the ferry leaves the northern harbor every morning at seven sharp.' },
    {
      id: 'planted-boolq',
      text: 'Encyclopedia: Tomato -- The tomato is the edible berry of a plant in the nightshade family. See also.',
    },
  ]
  const src = join(root, 'docs.jsonl')
  writeFileSync(src, docs.map((d) => JSON.stringify(d)).join('\n') + '\n')
  const raw = ingestStep({ name: 'mixed', source: src, format: 'jsonl' })
  const options = {
    name: 'mixed-clean',
    tasks: ['brown_bpb', 'brown_cloze', taskFile, 'boolq'],
    lmEvalTasks: LM_EVAL,
    dataDir: join(LM_EVAL, 'data'),
    n: 8,
  }
  const decon = decontaminateStep(raw, options)
  const prefix = join(root, 'prefix')
  const rec = await new Executor({ prefix, leaseTtlMs: 2000 }).run(new Experiment({ name: 'dc', steps: [decon] }))
  expect(
    rec.steps.map((s) => `${s.name}:${s.status}`),
    JSON.stringify(rec.steps.map((s) => s.error)),
  ).toEqual(['mixed:SUCCESS', 'mixed-clean:SUCCESS'])
  const arts = JSON.parse(readFileSync(join(prefix, rec.steps[1]!.nameHash, 'artifacts.json'), 'utf8')) as {
    artifacts: { name: string; version: number }[]
    report: { documentsIn: number; contaminated: number; kept: number; perTask: { task: string; documents: number }[] }
  }
  const { report } = arts
  expect(report.documentsIn).toBe(docs.length)
  expect(report.contaminated).toBe(3)
  const perTask = Object.fromEntries(report.perTask.map((p) => [p.task, p.documents]))
  expect(Object.keys(perTask)).toEqual(['brown_bpb', 'brown_cloze', 'harbor_qa', 'boolq'])
  expect(perTask.brown_bpb).toBe(1)
  expect(perTask.harbor_qa).toBe(1)
  expect(perTask.boolq).toBe(1)
  // What is left is exactly the clean documents; the dataset's metadata has the counts per task.
  const ds = await openDataset('mixed-clean', { version: arts.artifacts[0]!.version, prefix })
  const texts: string[] = []
  for (const path of ds.shards)
    for await (const row of new ParquetReader({ path })) texts.push((row as { text: string }).text)
  expect(texts.sort()).toEqual([...clean].sort())
  const meta = ds.metadata.decontamination as { perTask: Record<string, { documents: number }> }
  expect(meta.perTask.harbor_qa!.documents).toBe(1)
  expect(meta.perTask.boolq!.documents).toBe(1)

  // The tasks and n are the step's version.
  const version = (o: typeof options) => {
    const s = decontaminateStep(raw, o)
    return computeVersions(topoSort([s])).get(s)!.nameHash
  }
  expect(version(options)).toBe(rec.steps[1]!.nameHash)
  expect(version({ ...options, n: 13 })).not.toBe(rec.steps[1]!.nameHash)
  expect(version({ ...options, tasks: ['brown_bpb'] })).not.toBe(rec.steps[1]!.nameHash)
}, 60_000)

test("an lm-eval task's doc_to_decontamination_query is what is matched, not the rest of its prompt", async () => {
  // One story task written twice: with lm-eval's query (the passage) and without it (prompt and answer).
  const dir = join(root, 'story')
  mkdirSync(dir)
  const story = {
    passage: 'The old lighthouse on the northern cape was rebuilt in stone after the great storm of that winter.',
    question: 'What did the harbor master write in the ledger kept beside the signal fire every night?',
    answer: 'the names of the ships',
  }
  writeFileSync(join(dir, 'story.jsonl'), `${JSON.stringify(story)}\n`)
  const yaml = (task: string, query: string) =>
    `task: ${task}\noutput_type: generate_until\ntest_split: test\n` +
    'dataset_kwargs:\n  data_files:\n    test: story.jsonl\n' +
    'doc_to_text: "{{passage}}\\nQuestion: {{question}}\\nAnswer:"\ndoc_to_target: answer\n' +
    query
  const withQuery = join(dir, 'story_query.yaml')
  const plain = join(dir, 'story_plain.yaml')
  writeFileSync(
    withQuery,
    yaml('story_query', 'should_decontaminate: true\ndoc_to_decontamination_query: "{{passage}}"\n'),
  )
  writeFileSync(plain, yaml('story_plain', ''))
  const [q, p] = await Promise.all([readLmEvalTask(withQuery), readLmEvalTask(plain)])
  expect(await evalTaskTexts(q)).toEqual([story.passage])
  expect(await evalTaskTexts(p)).toEqual([`${story.passage}\nQuestion: ${story.question}\nAnswer: ${story.answer}`])

  const clean = Array.from(
    { length: 8 },
    (_, i) => `Clean note ${i}: the ferry timetable for pier ${i} changes in spring.`,
  )
  const docs = [
    ...clean.map((text, i) => ({ id: `clean-${i}`, text })),
    { id: 'passage', text: `Local history: ${story.passage} So says the guide.` },
    { id: 'question', text: `Quiz night: ${story.question} Nobody knew.` },
  ]
  const src = join(dir, 'docs.jsonl')
  writeFileSync(src, docs.map((d) => JSON.stringify(d)).join('\n') + '\n')
  const raw = ingestStep({ name: 'story-docs', source: src, format: 'jsonl' })
  const decon = decontaminateStep(raw, { name: 'story-clean', tasks: [withQuery, plain], n: 8, mode: 'flag' })
  const prefix = join(root, 'prefix-story')
  const rec = await new Executor({ prefix, leaseTtlMs: 2000 }).run(new Experiment({ name: 'st', steps: [decon] }))
  expect(
    rec.steps.map((s) => s.status),
    JSON.stringify(rec.steps.map((s) => s.error)),
  ).toEqual(['SUCCESS', 'SUCCESS'])
  const arts = JSON.parse(readFileSync(join(prefix, rec.steps[1]!.nameHash, 'artifacts.json'), 'utf8')) as {
    artifacts: { version: number }[]
    report: { contaminated: number; perTask: { task: string; documents: number; evalTooShort: number }[] }
  }
  expect(arts.report.contaminated).toBe(2)
  expect(arts.report.perTask.map((t) => [t.task, t.documents, t.evalTooShort])).toEqual([
    ['story_query', 1, 0],
    ['story_plain', 2, 0],
  ])
  // Flagged: the passage matches both tasks; the question, part of the prompt only, matches the plain task alone.
  const ds = await openDataset('story-clean', { version: arts.artifacts[0]!.version, prefix })
  const tasksOf = new Map<string, string[]>()
  for (const path of ds.shards)
    for await (const row of new ParquetReader({ path })) {
      const r = row as { text: string; meta?: string }
      const m = r.meta ? (JSON.parse(r.meta) as { contamination?: { tasks: string[] } }) : {}
      if (m.contamination) tasksOf.set(docs.find((d) => d.text === r.text)!.id, [...m.contamination.tasks].sort())
    }
  expect(Object.fromEntries(tasksOf)).toEqual({ passage: ['story_plain', 'story_query'], question: ['story_plain'] })
}, 60_000)

test('a doc_to_decontamination_query naming a Python !function with no built-in equivalent is refused', async () => {
  const f = join(root, 'fn_query.yaml')
  writeFileSync(
    f,
    'task: fn_query\noutput_type: generate_until\ntest_split: test\ndoc_to_text: q\ndoc_to_target: a\n' +
      'doc_to_decontamination_query: !function utils.query\n',
  )
  await expect(readLmEvalTask(f)).rejects.toThrow(/fn_query.yaml: doc_to_decontamination_query: !function utils.query/)
})

test('decontaminateStep refuses bad options when defined, and a missing task when it runs', async () => {
  const raw = ingestStep({ name: 'x', source: join(root, 'none.jsonl'), format: 'jsonl' })
  expect(() => decontaminateStep(raw, { name: 'd', tasks: [] })).toThrow(/tasks is empty/)
  expect(() => decontaminateStep(raw, { name: 'd', tasks: ['brown_bpb'], mode: 'drop' as 'flag' })).toThrow(
    /mode must be 'remove' or 'flag', got drop/,
  )
  writeFileSync(join(root, 'one.jsonl'), `${JSON.stringify({ text: 'just one plain document here' })}\n`)
  const one = ingestStep({ name: 'one', source: join(root, 'one.jsonl'), format: 'jsonl' })
  const rec = await new Executor({ prefix: join(root, 'prefix2'), leaseTtlMs: 2000 }).run(
    new Experiment({ name: 'dc2', steps: [decontaminateStep(one, { name: 'one-clean', tasks: ['no_such_task'] })] }),
  )
  expect(rec.steps.at(-1)!.status).toBe('FAILED')
  expect(rec.steps.at(-1)!.error).toMatch(/task "no_such_task" is not built in/)
}, 60_000)
