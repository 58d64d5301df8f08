import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, test } from 'vitest'
import type { LocalLanguageModel } from './local-model.js'
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

type Row = { question: string; answer: string }

/** Python's re.findall over the text, as the harness's regex filter reads it (written out here for the test). */
function pyFindallGroups(re: RegExp, text: string): string[][] {
  return [...text.matchAll(re)].map((m) => m.slice(1).map((g) => g ?? ''))
}

describe('gsm8k.yaml (unchanged upstream): 5-shot generate_until with filter_list', () => {
  test('contexts from the train split, stop sequences, both filter pipelines scored', async () => {
    const task = await readLmEvalTask(join(LM_EVAL_FIXTURES, 'gsm8k/gsm8k.yaml'), { dataDir: LM_EVAL_DATA })
    expect(task.numFewshot).toBe(5)
    const train = fixtureRows('openai/gsm8k/main/train.jsonl') as Row[]
    const rows = fixtureRows('openai/gsm8k/main/test.jsonl') as Row[]
    // fewshot_split (train) is not test_split (test): each document takes CPython's next
    // Random(1234).sample(range(6), 5).
    const draws = pythonSampleCalls(6, 5)
    const shot = (r: Row) => `Question: ${r.question}\nAnswer: ${r.answer}\n\n`
    const expected = rows
      .slice(0, 2)
      .map((r, i) => draws[i]!.map((j) => shot(train[j]!)).join('') + `Question: ${r.question}\nAnswer:`)
    expect(expected[0]!.startsWith('Question: A farm has 7 cows and 5 goats.')).toBe(true)

    const m = new Recording(local)
    const r = await runTask(m, task, { limit: 2 })
    expect(m.gen).toEqual(expected.map((context) => ({ context, maxTokens: 256 })))
    expect(r.metrics.map((x) => x.metric)).toEqual(['exact_match,strict-match', 'exact_match,flexible-extract'])

    // The same generations, cut at the first of until (["Question:", "</s>", "<|im_end|>"]) and filtered by hand.
    const outs = await local.generate(m.gen)
    const golds = ['72', '12']
    const strictScores: number[] = [],
      flexScores: number[] = []
    outs.forEach((o, i) => {
      const cut = ['Question:', '</s>', '<|im_end|>'].reduce(
        (s, u) => (s.includes(u) ? s.slice(0, s.indexOf(u)) : s),
        o,
      )
      const strict = pyFindallGroups(/#### (-?[0-9.,]+)/g, cut)[0]?.[0]?.trim() ?? '[invalid]'
      const last = pyFindallGroups(/(-?[$0-9.,]{2,})|(-?[0-9]+)/g, cut).at(-1)
      const flexible = last ? (last.find((g) => g !== '') ?? '[invalid]').trim() : '[invalid]'
      const rec = r.records[i] as { prediction: string; filtered: Record<string, string> }
      expect(rec.prediction).toBe(cut)
      expect(rec.filtered).toEqual({ 'strict-match': strict, 'flexible-extract': flexible })
      // exact_match's regexes_to_ignore: ",", "\$", "(?s).*#### ", "\.$"; ignore_case.
      const norm = (s: string) =>
        s
          .replace(/,/g, '')
          .replace(/\$/g, '')
          .replace(/^[\s\S]*#### /, '')
          .replace(/\.$/, '')
          .toLowerCase()
          .trim()
      strictScores.push(norm(strict) === golds[i] ? 1 : 0)
      flexScores.push(norm(flexible) === golds[i] ? 1 : 0)
    })
    expect(r.metrics[0]!.value).toBe((strictScores[0]! + strictScores[1]!) / 2)
    expect(r.metrics[1]!.value).toBe((flexScores[0]! + flexScores[1]!) / 2)
  })

  test('zero-shot by override keeps the stop sequences and needs no train split', async () => {
    const task = await readLmEvalTask(join(LM_EVAL_FIXTURES, 'gsm8k/gsm8k.yaml'), {
      dataFiles: join(LM_EVAL_DATA, 'openai/gsm8k/main/test.jsonl'),
      numFewshot: 0,
    })
    expect(task.numFewshot).toBe(0)
    expect(task.until).toEqual(['Question:', '</s>', '<|im_end|>'])
    expect(task.filters?.map((f) => f.name)).toEqual(['strict-match', 'flexible-extract'])
  })

  test('what greedy generation cannot honour is refused, naming the file and field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lm-eval-gen-bad-'))
    writeFileSync(join(dir, 'd.jsonl'), '{"q": "a", "a": "b"}\n')
    const base =
      'task: t\ndataset_path: json\ndataset_kwargs:\n  data_files: d.jsonl\ntest_split: train\n' +
      'doc_to_text: "{{q}}"\ndoc_to_target: "{{a}}"\n'
    const bad = async (name: string, body: string, re: RegExp) => {
      writeFileSync(join(dir, name), base + body)
      await expect(readLmEvalTask(join(dir, name))).rejects.toMatchObject({
        code: 'BAD_CONFIG',
        message: expect.stringMatching(re),
      })
    }
    await bad('rep.yaml', 'output_type: generate_until\nrepeats: 4\n', /rep\.yaml: repeats: 4/)
    await bad(
      'samp.yaml',
      'output_type: generate_until\ngeneration_kwargs:\n  do_sample: true\n',
      /samp\.yaml: generation_kwargs: sampling/,
    )
    await bad(
      'temp.yaml',
      'output_type: generate_until\ngeneration_kwargs:\n  temperature: 0.7\n',
      /temp\.yaml: generation_kwargs/,
    )
    await bad(
      'fl.yaml',
      'output_type: loglikelihood\nfilter_list:\n  - name: x\n    filter:\n      - function: take_first\n',
      /fl\.yaml: filter_list applies to generate_until/,
    )
    await bad(
      'roll.yaml',
      'output_type: loglikelihood_rolling\nnum_fewshot: 2\n',
      /roll\.yaml: num_fewshot: 2: loglikelihood_rolling/,
    )
    await bad(
      'fn.yaml',
      'output_type: generate_until\nnum_fewshot: 1\nfewshot_config:\n  samples: !function utils.list_fewshot_samples\n',
      /fn\.yaml: fewshot_config\.samples: !function utils\.list_fewshot_samples is Python/,
    )
  })

  test('a list target (several accepted answers) scores exact_match when any matches, as lm-eval does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lm-eval-multi-'))
    // What this model says after the prompt, cut at the newline: one of the accepted answers below.
    const [said] = await local.generate([{ context: 'Q: the cat sat on the\nA:', maxTokens: 4 }])
    const answer = said!.split('\n')[0]!.trim()
    expect(answer).not.toBe('')
    writeFileSync(
      join(dir, 'qa.jsonl'),
      `${JSON.stringify({ q: 'the cat sat on the', answers: ['zzz', answer] })}\n` +
        `${JSON.stringify({ q: 'the cat sat on the', answers: ['zzz', 'yyy'] })}\n`,
    )
    writeFileSync(
      join(dir, 'qa.yaml'),
      'task: multi_qa\ndataset_path: json\ndataset_kwargs:\n  data_files: qa.jsonl\ntest_split: train\n' +
        'output_type: generate_until\ndoc_to_text: "Q: {{q}}\\nA:"\ndoc_to_target: "{{answers}}"\n' +
        'generation_kwargs:\n  until: ["\\n"]\n  max_gen_toks: 4\n',
    )
    const r = await runTask(new Recording(local), await readLmEvalTask(join(dir, 'qa.yaml')))
    expect(r.records.map((x) => x.exactMatch)).toEqual([1, 0])
    expect(r.metrics[0]!.value).toBe(0.5)
  })
})
