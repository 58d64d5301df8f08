/** Task files are others' files (issue 33): their templates, patterns, literals and includes stay bounded. */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { choicesOf, listLiteral, render } from './lm-eval-fields.js'
import { applyFilter, exactMatchScore, parseFilterList } from './lm-eval-filters.js'
import { readLmEvalTask } from './lm-eval-task.js'
import { MAX_LITERAL_DEPTH, pythonLiteral } from './python-literal.js'

const dir = mkdtempSync(join(tmpdir(), 'lm-eval-untrusted-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
writeFileSync(join(dir, 'd.jsonl'), '{"q":"a","c":["x","y"],"g":0}\n')
/** A task file: these keys (YAML text per key) over a small multiple-choice task's. */
const task = (name: string, keys: Record<string, string>) => {
  const file = join(dir, name)
  const all: Record<string, string> = {
    task: 'hellaswag_x',
    output_type: 'multiple_choice',
    dataset_kwargs: '\n  data_files: d.jsonl',
    test_split: 'test',
    doc_to_text: 'q',
    doc_to_target: 'g',
    doc_to_choice: 'c',
    ...keys,
  }
  writeFileSync(
    file,
    Object.entries(all)
      .map(([k, v]) => `${k}: ${v}\n`)
      .join(''),
  )
  return file
}

describe('templates in task files', () => {
  test("doc_to_text with range(30000000) is refused at once with BAD_TEMPLATE naming the task's field", () => {
    const t0 = performance.now()
    expect(() =>
      render('{% for i in range(30000000) %}{% endfor %}', {}, 't.yaml (task t): doc_to_text of document 3'),
    ).toThrow(
      expect.objectContaining({
        code: 'BAD_TEMPLATE',
        message: expect.stringMatching(
          /^t\.yaml \(task t\): doc_to_text of document 3: the template is refused: range/,
        ),
      }),
    )
    expect(performance.now() - t0).toBeLessThan(1000)
    expect(render('{{ q }}!', { q: 'a' }, 'x')).toBe('a!')
  })
})

describe('Python literals (doc_to_choice texts)', () => {
  test('quotes, escapes, nesting, numbers, True/False/None, tuples, dicts, adjacent strings', () => {
    expect(pythonLiteral(`["it\\'s", 'b']`, 'f')).toEqual(["it's", 'b'])
    expect(pythonLiteral(`['a\\nb', "c\\"d", '\\x41\\u00e9', r'\\d', 'x' "y", 'q\\z']`, 'f')).toEqual([
      'a\nb',
      'c"d',
      'Aé',
      '\\d',
      'xy',
      'q\\z',
    ])
    expect(pythonLiteral('[1, -2.5, 1e3, 0x10, True, False, None, (1, 2), [[]], {"k": [3]},]', 'f')).toEqual([
      1,
      -2.5,
      1000,
      16,
      true,
      false,
      null,
      [1, 2],
      [[]],
      { k: [3] },
    ])
    const ch = choicesOf('{{ "[\\"it\\\\\'s\\", \'b\']" }}', {}, 'f.yaml (task t): doc_to_choice of document 0')
    expect(ch).toEqual(["it's", 'b'])
  })

  test('a text that is not a literal names the field and the position; deep nesting is bounded', () => {
    expect(() => choicesOf('c', { c: "['a', 'b'" }, 'f.yaml (task t): doc_to_choice of document 2')).toThrow(
      /^f\.yaml \(task t\): doc_to_choice of document 2: not a Python literal: expected "," or "\]" at position 9/,
    )
    expect(() => pythonLiteral("['a' 'b' c]", 'f')).toThrow(/expected "," or "\]" at position 9/)
    const deep = '['.repeat(20_000) + ']'.repeat(20_000)
    expect(() => pythonLiteral(deep, 'doc_to_choice')).toThrow(
      new RegExp(`doc_to_choice: not a Python literal: nested deeper than ${MAX_LITERAL_DEPTH} levels at position 100`),
    )
    // A target that only looks like a list stays text, as the harness falls back to it.
    expect(listLiteral(deep)).toBe(deep)
    expect(listLiteral('[blank]')).toBe('[blank]')
    expect(listLiteral("['a', 'b']")).toEqual(['a', 'b'])
  })
})

describe('patterns in task files run with a time budget', () => {
  const evil = 'a'.repeat(36) + '!'
  test('regexes_to_ignore ^(a+)+$ is refused within the budget, naming the task, the field and the pattern', () => {
    const m = {
      ignoreCase: false,
      ignorePunctuation: false,
      regexesToIgnore: ['\\s+', '^(a+)+$'],
      where: 'g.yaml (task gsm): metric_list[0] (exact_match)',
    }
    expect(exactMatchScore(' 7 ', '7', m)).toBe(1)
    const t0 = performance.now()
    expect(() => exactMatchScore(evil, '7', m)).toThrow(
      new RegExp(
        String.raw`^g\.yaml \(task gsm\): metric_list\[0\] \(exact_match\): regexes_to_ignore\[1\]: ` +
          String.raw`the pattern "\^\(a\+\)\+\$" is refused: it did not finish within 1000 ms on a 37-character text`,
      ),
    )
    expect(performance.now() - t0).toBeLessThan(5000)
    // The runner recovers: the next call gets a fresh worker.
    expect(exactMatchScore('7', '7', m)).toBe(1)
  })

  test('a filter_list regex that backtracks without bound is refused naming the pipeline and step', () => {
    const [f] = parseFilterList(
      [{ name: 'evil', filter: [{ function: 'regex', regex_pattern: '^(a|aa)+$' }, { function: 'take_first' }] }],
      'g.yaml (task gsm)',
    )
    expect(applyFilter(f!, ['aaaa'])).toBe('a') // re.findall gives the group's last repetition
    // (a|aa)+ takes Fibonacci(n) paths: 64 a's are out of reach on any machine (37 can finish in a second)
    expect(() => applyFilter(f!, [`${'a'.repeat(64)}!`])).toThrow(
      new RegExp(
        String.raw`^g\.yaml \(task gsm\): filter_list\[0\] \(evil\) step 0 \(regex\) regex_pattern: ` +
          String.raw`the pattern "\^\(a\|aa\)\+\$" is refused`,
      ),
    )
  })

  test('an invalid regexes_to_ignore fails when the task is read, naming the task and the index', async () => {
    const file = task('bad-ignore.yaml', {
      task: 'gen_x',
      output_type: 'generate_until',
      metric_list: '\n  - metric: exact_match\n    regexes_to_ignore: ["ok", "(unclosed"]',
    })
    await expect(readLmEvalTask(file)).rejects.toThrow(
      new RegExp(
        String.raw`bad-ignore\.yaml \(task gen_x\): metric_list\[0\] \(exact_match\): regexes_to_ignore\[1\]: ` +
          String.raw`"\(unclosed" is not a valid pattern`,
      ),
    )
  })
})

describe('names and includes in task files', () => {
  test('!function __proto__ is an unknown name, and the error lists the known ones', async () => {
    await expect(readLmEvalTask(task('proto.yaml', { process_docs: '!function __proto__' }))).rejects.toThrow(
      new RegExp(
        'process_docs: !function __proto__ is Python, and has no built-in equivalent for task hellaswag_x; ' +
          String.raw`its built-ins are utils\.process_docs`,
      ),
    )
    await expect(
      readLmEvalTask(task('ctor.yaml', { task: 'mine', doc_to_text: '!function constructor' })),
    ).rejects.toThrow(/doc_to_text: !function constructor is Python, and task mine has no built-in functions/)
  })

  test('an include loop through a symlinked folder is named as a cycle of the real files', async () => {
    mkdirSync(join(dir, 'real'))
    symlinkSync(join(dir, 'real'), join(dir, 'link'))
    symlinkSync(dir, join(dir, 'real', 'up')) // real/up/real/up/... never repeats as a path
    writeFileSync(join(dir, 'real', 'a.yaml'), 'include: ../link/b.yaml\ntask: a\n')
    writeFileSync(join(dir, 'real', 'b.yaml'), 'include: up/real/up/link/a.yaml\ntask: b\n')
    const a = join(dir, 'real', 'a.yaml'),
      b = join(dir, 'real', 'b.yaml')
    const err = (await readLmEvalTask(join(dir, 'link', 'a.yaml')).catch((e: Error) => e)) as Error
    expect(err.message).toBe(`${a}: include cycle: ${a} → ${b} → ${a}; remove one of these includes`)
  })
})
