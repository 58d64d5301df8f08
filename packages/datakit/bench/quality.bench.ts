/**
 * The quality classifier against fastText itself (`pnpm bench datakit`, topic `quality`), on
 * fastText's tutorial data (test-fixtures/cooking-stackexchange: 15,404 titles, 735 labels), its
 * tutorial split (first 12,404 lines train, last 3,000 test) and the same hyper-parameters
 * (fastText's supervised defaults: dim 100, lr 0.1, epoch 5, minCount 1, softmax; wordNgrams from
 * `DATAKIT_QUALITY_NGRAMS`, default `1,2`: words, then words and bigrams in fastText's 2M hash
 * buckets), one thread on both sides (`-thread 1`):
 * - precision@1 on the test set (ours, fastText's, and the difference in points);
 * - training time: `fasttext supervised` (a process: read, train, write the model) vs our
 *   `trainClassifier` and `saveClassifier`;
 * - scoring throughput: `fasttext predict-prob` over the test titles ten times (30,000 lines) vs
 *   our `loadClassifier` and the most likely label with its probability for each line (both
 *   include loading the model: with bigrams fastText reads its whole 2M-row matrix, we read the
 *   rows training changed);
 * - model load alone: `fasttext predict-prob` over an empty file vs our `loadClassifier`.
 * Medians of `DATAKIT_BENCH_RUNS` runs (default 3), the two sides interleaved so that they share
 * the machine's load. Skipped, saying so on stderr, when `fasttext` is not on PATH (Debian:
 * `apt-get install fasttext`).
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { emit, median } from '@marin/rigging/bench'
import { loadClassifier, saveClassifier } from '../src/quality/model-file.js'
import { trainClassifier } from '../src/quality/train.js'

const bench = 'datakit'
const runs = Number(process.env.DATAKIT_BENCH_RUNS ?? 3)
const ngramsList = (process.env.DATAKIT_QUALITY_NGRAMS ?? '1,2').split(',').map(Number)

const found = spawnSync('sh', ['-c', 'command -v fasttext'], { encoding: 'utf8' })
if (found.status !== 0 || found.stdout.trim() === '') {
  process.stderr.write('quality: skipped: fasttext is not on PATH (Debian: apt-get install fasttext)\n')
  process.exit(0)
}

const fixture = join(import.meta.dirname, '../test-fixtures/cooking-stackexchange/cooking.stackexchange.txt')
const lines = readFileSync(fixture, 'utf8')
  .split('\n')
  .filter((l) => l !== '')
const train = lines.slice(0, lines.length - 3000)
const test = lines.slice(-3000)
const scoring = Array.from({ length: 10 }, () => test).flat()

const root = mkdtempSync(join(tmpdir(), 'datakit-quality-bench-'))
const trainFile = join(root, 'train.txt')
const testFile = join(root, 'test.txt')
const scoreFile = join(root, 'score.txt')
const emptyFile = join(root, 'empty.txt')
writeFileSync(emptyFile, '')
writeFileSync(trainFile, `${train.join('\n')}\n`)
writeFileSync(testFile, `${test.join('\n')}\n`)
writeFileSync(scoreFile, `${scoring.map((l) => l.replace(/__label__\S+\s*/g, '')).join('\n')}\n`)

function timed<T>(fn: () => T): [T, number] {
  const t0 = process.hrtime.bigint()
  const r = fn()
  return [r, Number(process.hrtime.bigint() - t0) / 1e9]
}

function fasttext(args: string[], out?: string): string {
  const r = spawnSync('fasttext', args, { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'pipe'] })
  if (r.status !== 0) throw new Error(`fasttext ${args.join(' ')} failed (${r.status}): ${r.stderr.slice(-500)}`)
  if (out) writeFileSync(out, r.stdout)
  return r.stdout
}

/**
 * Precision@1 as `fasttext test` counts it: examples with a label and a row; right if the top label is one of
 * theirs.
 */
function precisionAt1(top: (text: string) => string | undefined): number {
  let n = 0
  let right = 0
  for (const l of test) {
    const labels = l.split(/\s+/).filter((t) => t.startsWith('__label__'))
    if (labels.length === 0) continue
    const p = top(l)
    if (p === undefined) continue
    n++
    if (labels.includes(p)) right++
  }
  return right / n
}

try {
  for (const wordNgrams of ngramsList) {
    const hp = { dim: 100, lr: 0.1, epoch: 5, minCount: 1, wordNgrams, bucket: 2_000_000 }
    const ftArgs = ['-dim', '100', '-lr', '0.1', '-epoch', '5', '-minCount', '1', '-wordNgrams', String(wordNgrams)]
    ftArgs.push('-bucket', '2000000', '-loss', 'softmax', '-thread', '1', '-verbose', '0')
    const m = { ftTrain: [] as number[], ourTrain: [] as number[], ftScore: [] as number[], ourScore: [] as number[] }
    const load = { ft: [] as number[], ours: [] as number[] }
    const p1 = { ft: [] as number[], ours: [] as number[] }
    let modelBytes = 0
    let ftBytes = 0
    for (let run = 0; run < runs; run++) {
      const ftModel = join(root, `ft-${wordNgrams}`)
      const [, ftT] = timed(() => fasttext(['supervised', '-input', trainFile, '-output', ftModel, ...ftArgs]))
      m.ftTrain.push(ftT)
      ftBytes = statSync(`${ftModel}.bin`).size
      p1.ft.push(Number(/P@1\s+([\d.]+)/.exec(fasttext(['test', `${ftModel}.bin`, testFile]))![1]))
      const [, ftS] = timed(() => fasttext(['predict-prob', `${ftModel}.bin`, scoreFile]))
      m.ftScore.push(ftS)
      load.ft.push(timed(() => fasttext(['predict-prob', `${ftModel}.bin`, emptyFile]))[1])

      const ourModel = join(root, `ours-${wordNgrams}.mqc`)
      const t0 = process.hrtime.bigint()
      const { classifier } = trainClassifier(train, { ...hp, seed: run })
      await saveClassifier(ourModel, classifier)
      m.ourTrain.push(Number(process.hrtime.bigint() - t0) / 1e9)
      modelBytes = statSync(ourModel).size
      p1.ours.push(precisionAt1((t) => classifier.top(t)))
      const t1 = process.hrtime.bigint()
      const loaded = await loadClassifier(ourModel)
      let sink = 0
      for (const l of readFileSync(scoreFile, 'utf8').split('\n')) {
        const top = loaded.predict(l, 1)[0]
        if (top !== undefined) sink += top.probability
      }
      m.ourScore.push(Number(process.hrtime.bigint() - t1) / 1e9)
      const t2 = process.hrtime.bigint()
      await loadClassifier(ourModel)
      load.ours.push(Number(process.hrtime.bigint() - t2) / 1e9)
      process.stderr.write(
        `quality ngrams=${wordNgrams} run ${run + 1}/${runs}: P@1 ours ${p1.ours.at(-1)} fastText ${p1.ft.at(-1)}; ` +
          `train s ours ${m.ourTrain.at(-1)!.toFixed(2)} fastText ${ftT.toFixed(2)}; ` +
          `score s ours ${m.ourScore.at(-1)!.toFixed(2)} fastText ${ftS.toFixed(2)} (${sink.toFixed(0)}); ` +
          `load s ours ${load.ours.at(-1)!.toFixed(3)} fastText ${load.ft.at(-1)!.toFixed(3)}\n`,
      )
    }
    const tag = `quality_ngrams${wordNgrams}`
    const ours = median(p1.ours)
    const theirs = median(p1.ft)
    emit({ bench, metric: `${tag}_precision_at_1`, value: ours, unit: 'P@1', baseline: theirs })
    emit({ bench, metric: `${tag}_precision_at_1_diff_points`, value: (ours - theirs) * 100, unit: 'points' })
    emit({
      bench,
      metric: `${tag}_train_s`,
      value: median(m.ourTrain),
      unit: 's',
      baseline: median(m.ftTrain),
      lowerIsBetter: true,
    })
    const n = scoring.length
    emit({
      bench,
      metric: `${tag}_score_lines_per_s`,
      value: n / median(m.ourScore),
      unit: 'lines/s',
      baseline: n / median(m.ftScore),
    })
    emit({
      bench,
      metric: `${tag}_model_load_s`,
      value: median(load.ours),
      unit: 's',
      baseline: median(load.ft),
      lowerIsBetter: true,
    })
    emit({
      bench,
      metric: `${tag}_model_bytes`,
      value: modelBytes,
      unit: 'bytes',
      baseline: ftBytes,
      lowerIsBetter: true,
    })
  }
} finally {
  rmSync(root, { recursive: true, force: true })
}
