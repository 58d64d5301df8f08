/**
 * @module The guides of docs/guides/ run, at tiny scale, and show their code as it is: each fenced block that
 * follows `<!-- file: PATH -->` must be that file, byte for byte, so the docs and the code cannot drift.
 */
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'

const root = resolve(import.meta.dirname, '../..')
const prefix = mkdtempSync(join(tmpdir(), 'guides-'))
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

/** The files a guide shows, and the text it shows for each. */
function shownFiles(markdown: string): { file: string; shown: string }[] {
  return [...markdown.matchAll(/<!-- file: (\S+) -->\n```ts\n([\s\S]*?)```/g)].map((m) => ({
    file: m[1]!,
    shown: m[2]!,
  }))
}

/** Runs a guide's script at tiny scale; its stdout, or an error with both streams when it fails. */
function run(script: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ['--import', 'tsx', script, ...args],
      {
        cwd: root,
        encoding: 'utf8',
        maxBuffer: 64 << 20,
        env: { ...process.env, GUIDE_SCALE: 'tiny', MARIN_PREFIX: prefix, LOG_LEVEL: 'warn', ...env },
      },
      (err, stdout, stderr) =>
        err ? reject(new Error(`${script} exited ${err.code}:\n${stdout}\n${stderr}`)) : resolve(stdout),
    ),
  )
}

/** `marin serve` as a process until `stop`: its base URL and the model name it reports once listening. */
async function serve(args: string[]): Promise<{ url: string; name: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['packages/marin/bin/marin.js', 'serve', '--port', '0', ...args], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = '',
    err = ''
  child.stderr.on('data', (d: Buffer) => (err += d.toString()))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const [, name, url] = await new Promise<string[]>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /serving (\S+) at (http:\/\/\S+)\n/.exec(out)
      if (m) resolve([...m])
    })
    child.once('exit', (code) => reject(new Error(`marin serve exited ${code}:\n${out}\n${err}`)))
  })
  return { url: url!, name: name!, stop: () => (child.kill('SIGTERM'), exited) }
}

/** The first experiment's two runs (the evaluation guide reuses its model): started by its test. */
let firstExperiment: Promise<[string, string]> | undefined
const runFirstExperiment = () =>
  (firstExperiment ??= (async () => {
    const out = await run('experiments/guides/first-experiment.ts', ['--local'])
    return [out, await run('experiments/guides/first-experiment.ts', ['--local'])]
  })())

describe('the guides', () => {
  const guides = readdirSync(join(root, 'docs/guides')).filter((f) => f.endsWith('.md'))

  test('every guide shows at least one experiment file, exactly as it is', () => {
    expect(guides.sort()).toEqual([
      'add-an-architecture.md',
      'cluster.md',
      'evaluation-task.md',
      'first-experiment.md',
      'zephyr-reader.md',
    ])
    for (const guide of guides) {
      const shown = shownFiles(readFileSync(join(root, 'docs/guides', guide), 'utf8'))
      expect(shown.length, guide).toBeGreaterThan(0)
      for (const { file, shown: text } of shown)
        expect(text, `${guide} shows ${file}; paste the file again`).toBe(readFileSync(join(root, file), 'utf8'))
    }
  })

  test('a changed file is caught', () => {
    const [first] = shownFiles('<!-- file: a.ts -->\n```ts\nconst a = 1\n```\n')
    expect(first).toEqual({ file: 'a.ts', shown: 'const a = 1\n' })
  })

  // The guides run side by side (each is its own process); the evaluation waits for the first experiment.
  test.concurrent('first experiment: four steps succeed, then all are skipped', async () => {
    const [out, again] = await runFirstExperiment()
    for (const s of ['guide-text', 'guide', 'guide-bpe', 'guide-gpt']) expect(out).toMatch(new RegExp(`SUCCESS ${s}_`))
    expect(again.match(/ {2}skip {2}/g)).toHaveLength(4)
  }, 240_000)

  test.concurrent('evaluation task: reuses the trained model and stores its scores', async () => {
    await runFirstExperiment()
    const out = await run('experiments/guides/evaluation-task.ts', ['--local'])
    expect(out).toMatch(/skip {2}guide-gpt_/)
    expect(out).toMatch(/SUCCESS guide-eval_/)
    const dir = readdirSync(prefix).find((d) => d.startsWith('guide-eval_'))!
    const results = JSON.parse(readFileSync(join(prefix, dir, 'results.json'), 'utf8'))
    expect(results.ref).toBe('eval/guide-continuation@1')
    expect(results.tasks.brown_continuation).toMatchObject({ kind: 'multiple_choice', samples: 12 })
  }, 240_000)

  test.concurrent('zephyr reader: TSV files read by the reader become a dataset', async () => {
    const out = await run('experiments/guides/zephyr-reader.ts', ['--local'])
    expect(out).toMatch(/SUCCESS guide-records_/)
    const dir = readdirSync(prefix).find((d) => d.startsWith('guide-tsv-jsonl_'))!
    const rows = readdirSync(join(prefix, dir))
      .filter((f) => f.endsWith('.jsonl'))
      .flatMap((f) =>
        readFileSync(join(prefix, dir, f), 'utf8')
          .trim()
          .split('\n'),
      )
      .map((l) => JSON.parse(l))
    expect(rows).toHaveLength(6)
    expect(rows[0]).toMatchObject({ id: 'ca01', genre: 'a' })
    expect(rows[0].text).toContain('\n') // newlines escaped in the TSV come back
  }, 120_000)

  test.concurrent('cluster: the first experiment runs as jobs on a local iris cluster', async () => {
    const other = mkdtempSync(join(tmpdir(), 'guides-cluster-'))
    try {
      const out = await run('experiments/guides/cluster.ts', [], { MARIN_PREFIX: other })
      for (const s of ['guide-text', 'guide', 'guide-bpe', 'guide-gpt'])
        expect(out).toMatch(new RegExp(`iris job first-experiment\\.${s}_[0-9a-f]{8}: SUCCEEDED`))
      expect(out).toContain('first-experiment: SUCCESS')
    } finally {
      rmSync(other, { recursive: true, force: true })
    }
  }, 240_000)

  const servedTitle =
    'add an architecture: trains alone, on { data: 2 }, fsdp and { model: 2 } to the same loss; marin serve ' +
    "serves its Hugging Face export with levanter generate's tokens"
  test.concurrent(servedTitle, async () => {
    const script = 'experiments/guides/add-an-architecture.ts'
    const dir = join(prefix, 'guide-gated-mlp-hf')
    // The four layouts, two in turn in each of two programs (a mesh's members are processes of their own).
    const [one, meshes] = await Promise.all([
      run(script, ['one', 'data', '--export', dir]),
      run(script, ['fsdp', 'model']),
    ])
    expect(one).toMatch(/^guide-gated-mlp: 11296 parameters, \d+ FLOPs per token$/m)
    const [, first, last] = one.match(/^one: loss (\S+) → (\S+) in 20 steps$/m)!
    expect(Number(last)).toBeLessThan(Number(first) * 0.7)
    expect([...one.matchAll(/^\w+: loss .*$/gm), ...meshes.matchAll(/^\w+: loss .*$/gm)].map((m) => m[0])).toEqual(
      ['one', 'data', 'fsdp', 'model'].map((layout) => `${layout}: loss ${first} → ${last} in 20 steps`),
    )
    const want = JSON.parse(one.match(/generate: "the quick" → (".*")$/m)![1]!) as string
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'))
    expect(config).toMatchObject({ architectures: ['GuideGatedMlpForCausalLM'], intermediate_size: 32 })
    const keyFile = join(prefix, 'serve-key')
    writeFileSync(keyFile, 'guide-key\n')
    const served = await serve(['--model-checkpoint', dir, '--architecture', script, '--api-key-file', keyFile])
    try {
      const ask = (key?: string) =>
        fetch(`${served.url}/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
          body: JSON.stringify({ model: served.name, prompt: 'the quick', max_tokens: 6, temperature: 0 }),
        })
      expect((await ask()).status).toBe(401)
      const r = await ask('guide-key')
      expect(r.status).toBe(200)
      const body = (await r.json()) as { choices: { text: string }[]; usage: { completion_tokens: number } }
      expect(body.usage.completion_tokens).toBe(6)
      expect(body.choices[0]!.text).toBe(want)
    } finally {
      await served.stop()
    }
  }, 240_000)
})
