import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'

const root = resolve(import.meta.dirname, '..')
const prefix = mkdtempSync(join(tmpdir(), 'quickstart-'))
const site = join(prefix, 'site')
afterAll(() => rmSync(prefix, { recursive: true, force: true }))

function runQuickstart(loader: string[]) {
  const t0 = performance.now()
  const run = spawnSync(process.execPath, [...loader, 'experiments/quickstart.ts'], {
    cwd: root,
    encoding: 'utf8',
    env: {
      ...process.env,
      QUICKSTART_SCALE: 'tiny',
      MARIN_PREFIX: prefix,
      QUICKSTART_SITE: site,
      LOG_LEVEL: 'warn',
      TS_NODE_TRANSPILE_ONLY: '1',
    },
  })
  if (run.status !== 0) throw new Error(`quickstart exited ${run.status}:\n${run.stdout}\n${run.stderr}`)
  return { out: run.stdout, seconds: (performance.now() - t0) / 1000 }
}

describe('the quickstart, tiny scale', () => {
  test('runs the whole pipeline with tsx; a second run (with ts-node) skips every step', () => {
    const first = runQuickstart(['--import', 'tsx'])
    for (const s of ['brown-text', 'brown', 'brown-dedup', 'brown-bpe', 'gpt-brown', 'eval-brown'])
      expect(first.out).toMatch(new RegExp(`SUCCESS ${s}_[0-9a-f]{8} `))
    expect(first.out).toContain('quickstart (tiny): 6 steps, 0 already done')
    const ckpt = /final checkpoint: (models\/gpt-brown@\d+)/.exec(first.out)?.[1]
    expect(ckpt).toBeDefined()
    expect(first.out).toMatch(/brown_cloze\s+acc\s+[\d.]+ ± [\d.]+ {2}\(n=10\)/)
    expect(first.out).toMatch(/brown_bpb\s+bits_per_byte\s+[\d.]+/)
    // How to serve the model and get its files, with commands that run from the repository root (and this prefix).
    expect(first.out).toContain(
      `serve it:      MARIN_PREFIX=${prefix} pnpm marin serve --model-checkpoint ${ckpt} --port 8000`,
    )
    expect(first.out).toContain(`get its files: MARIN_PREFIX=${prefix} pnpm marin export ${ckpt} ./gpt-brown`)
    const files = join(prefix, 'exported-model')
    const exported = spawnSync(process.execPath, ['packages/marin/bin/marin.js', 'export', ckpt!, files], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, MARIN_PREFIX: prefix },
    })
    expect(exported.status, exported.stderr).toBe(0)
    expect(existsSync(join(files, 'config.json'))).toBe(true)
    // The plan comes first; then each step says it started before it ends.
    expect(first.out.split('\n')[0]).toMatch(/^running quickstart-tiny: 6 steps under /)
    for (const s of ['brown-text', 'gpt-brown', 'eval-brown'])
      expect(first.out).toMatch(new RegExp(`… ${s}_[0-9a-f]{8}: started[^]*SUCCESS ${s}_`))
    // The two bits-per-byte figures say what they measure.
    expect(first.out).toMatch(
      /loss on the held-out split of the training tokens [\d.]+ nats\/token \([\d.]+ bits\/byte, /,
    )
    expect(first.out).toContain('brown_bpb: sentences of held-out Brown files, each scored alone with no context')
    // The report says it is being built before the seconds that takes.
    expect(first.out).toMatch(/report of quickstart-tiny: building …\n(.*\n)*report of quickstart-tiny: \d+ files/)
    // The scores are a table: every row's value starts in the same column.
    const rows = first.out.split('\n').filter((l) => /^ {2}brown_\w+ /.test(l))
    expect(rows.length).toBeGreaterThanOrEqual(5)
    expect(new Set(rows.map((l) => l.search(/\d/))).size).toBe(1)

    // Every artifact the steps made is in finestore, and the eval ran against `marin serve` over HTTP.
    const record = JSON.parse(
      readFileSync(
        join(prefix, 'experiments/quickstart-tiny', readdirSync(join(prefix, 'experiments/quickstart-tiny'))[0]!),
        'utf8',
      ),
    )
    const out = (name: string) => record.steps.find((s: { name: string }) => s.name === name).outputPath as string
    const trained = JSON.parse(readFileSync(join(out('gpt-brown'), 'artifacts.json'), 'utf8'))
    // The steps hand on typed artifact references: { kind: 'artifact', name, version }.
    expect(trained.artifacts[0]).toEqual({
      kind: 'artifact',
      name: 'models/gpt-brown',
      version: Number(ckpt!.split('@')[1]),
    })
    expect(trained.artifacts[1]).toMatchObject({
      kind: 'artifact',
      name: expect.stringMatching(/^checkpoints\/gpt-brown_[0-9a-f]{8}$/),
    })
    expect(trained.steps).toBe(40)
    expect(trained.unigramEntropy).toBeGreaterThan(3)
    // Training's progress lines carry the step, loss, eval loss, tokens/s and the time left.
    const trainLogs = readdirSync(join(out('gpt-brown'), 'logs'))
      .map((f) => readFileSync(join(out('gpt-brown'), 'logs', f), 'utf8'))
      .join('')
    const progress = trainLogs
      .split('\n')
      .filter((l) => l.includes('"msg":"training"') && l.includes('"of":40'))
      .map((l) => JSON.parse(l))
    expect(progress.at(-1)).toMatchObject({ step: 40, of: 40, eta: '0s' })
    expect(progress.some((p) => typeof p.eval_loss === 'number' && typeof p.tokens_per_s === 'number')).toBe(true)
    const evalLogs = readdirSync(join(out('eval-brown'), 'logs'))
      .map((f) => readFileSync(join(out('eval-brown'), 'logs', f), 'utf8'))
      .join('')
    expect(evalLogs).toContain('marin serve is up')
    expect(evalLogs).toMatch(/"url":"http:\/\/127\.0\.0\.1:\d+\/v1"/)
    const dedup = JSON.parse(readFileSync(join(out('brown-dedup'), 'artifacts.json'), 'utf8'))
    expect(dedup.report.documentsIn).toBe(20)

    // The report is published: the site lists the run, whose page names its steps and shows the eval samples.
    const index = readFileSync(join(site, 'index.html'), 'utf8')
    expect(index).toContain('quickstart-tiny')
    const page = join(site, 'runs', 'quickstart-tiny', record.run)
    expect(index).toContain(`runs/quickstart-tiny/${record.run}/index.html`)
    const firstPage = readFileSync(join(page, 'index.html'), 'utf8')
    expect(firstPage).toContain('gpt-brown')
    expect(firstPage).not.toContain('No sample generations')
    expect(existsSync(join(page, 'report.md'))).toBe(true)

    // Again, under ts-node: nothing runs, the same model is reported, the site is republished unchanged.
    const second = runQuickstart(['--no-warnings', '--loader', 'ts-node/esm'])
    for (const s of ['brown-text', 'brown', 'brown-dedup', 'brown-bpe', 'gpt-brown', 'eval-brown'])
      expect(second.out).toMatch(new RegExp(`skip {2}${s}_[0-9a-f]{8}`))
    expect(second.out).not.toMatch(/SUCCESS \S+_[0-9a-f]{8} /)
    expect(second.out).toContain('quickstart (tiny): 6 steps, 6 already done')
    expect(second.out).toContain(`final checkpoint: ${ckpt}`)
    // The site lists both runs, and the first run's page is as it was.
    const runs = JSON.parse(readFileSync(join(site, 'runs.json'), 'utf8')) as { run: string }[]
    expect(runs).toHaveLength(2)
    expect(runs[1]!.run).toBe(record.run)
    expect(readFileSync(join(page, 'index.html'), 'utf8')).toBe(firstPage)
    expect(readFileSync(join(site, 'runs', 'quickstart-tiny', runs[0]!.run, 'index.html'), 'utf8')).toContain(
      `href="../${record.run}/index.html"`,
    )
  }, 300_000)
})
