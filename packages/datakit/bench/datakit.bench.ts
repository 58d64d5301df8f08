/**
 * Benchmarks of @marin/datakit (`pnpm bench datakit`):
 * - BPE training for a 16k vocabulary on ~10 MB of text: the Brown corpus (all 500 files,
 *   tags stripped, ~6.2 MB) plus its first ~3.8 MB again, and on Brown alone;
 * - encode MB/s of our BpeTokenizer loaded from GPT-2's files vs gpt-tokenizer (r50k_base,
 *   the same vocabulary) on the Brown text, ids checked equal first;
 * - token cache build MB/s: ingest Brown into a scratch store, then tokenize it with GPT-2.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { emit, median, timeIt } from '@marin/rigging/bench'
import { encode as gptEncode } from 'gpt-tokenizer/encoding/r50k_base'
import { buildTokenCache } from '../src/cache/build-token-cache.js'
import { ingest } from '../src/dataset/ingest.js'
import { brownParagraphs, gpt2Files } from '../src/test-support/brown.js'
import { BpeTokenizer } from '../src/tokenizer/bpe-tokenizer.js'
import { trainBpe } from '../src/tokenizer/train-bpe.js'

const bench = 'datakit'
const runs = Number(process.env.DATAKIT_BENCH_RUNS ?? 3)
const paragraphs = brownParagraphs()
const brownBytes = paragraphs.reduce((a, p) => a + Buffer.byteLength(p) + 1, 0)
const MB = 1e6

// ~10 MB: Brown, then Brown again from the start until 10 MB.
const tenMb: string[] = [...paragraphs]
let size = brownBytes
for (let i = 0; size < 10 * MB; i++) {
  const p = paragraphs[i % paragraphs.length]!
  tenMb.push(p)
  size += Buffer.byteLength(p) + 1
}

function timeOnce(fn: () => unknown): number {
  const t0 = process.hrtime.bigint()
  fn()
  return Number(process.hrtime.bigint() - t0) / 1e9
}

// 1. Encode vs gpt-tokenizer on the same vocabulary and text.
const { encoderJson, vocabBpe } = gpt2Files()
const tok = BpeTokenizer.fromGpt2Files(encoderJson, vocabBpe)
const sample = paragraphs.slice(0, 2000)
for (const p of sample) {
  const a = tok.encode(p)
  const b = gptEncode(p)
  if (a.length !== b.length || a.some((x, i) => x !== b[i]))
    throw new Error(`ids differ from gpt-tokenizer on: ${p.slice(0, 80)}`)
}
// Interleaved runs, so both see the same machine load; medians.
const ourTimes: number[] = []
const baseTimes: number[] = []
for (let r = 0; r < Math.max(5, runs); r++) {
  ourTimes.push(
    await timeIt(
      () => {
        for (const p of paragraphs) tok.encode(p)
      },
      { runs: 1, warmup: r === 0 ? 1 : 0 },
    ),
  )
  baseTimes.push(
    await timeIt(
      () => {
        for (const p of paragraphs) gptEncode(p)
      },
      { runs: 1, warmup: r === 0 ? 1 : 0 },
    ),
  )
}
const ours = median(ourTimes)
const base = median(baseTimes)
emit({
  bench,
  metric: 'encode_gpt2_mb_per_s',
  value: brownBytes / MB / ours,
  unit: 'MB/s',
  baseline: brownBytes / MB / base,
})

// 2. Token cache build: Brown (as 8 JSONL shards) → dataset version → GPT-2 token cache.
const root = mkdtempSync(join(tmpdir(), 'datakit-bench-'))
try {
  const shards = 8
  for (let s = 0; s < shards; s++) {
    const part = paragraphs.filter((_, i) => i % shards === s)
    writeFileSync(join(root, `brown-${s}.jsonl`), `${part.map((text) => JSON.stringify({ text })).join('\n')}\n`)
  }
  const prefix = join(root, 'marin')
  await ingest({ name: 'brown', source: join(root, 'brown-*.jsonl'), format: 'jsonl', prefix })
  const times: number[] = []
  for (let r = 0; r < runs; r++) {
    // A fresh tokenizer object each run, so its word cache starts empty, and a new cache name so nothing is reused.
    const fresh = BpeTokenizer.fromGpt2Files(encoderJson, vocabBpe)
    const t0 = process.hrtime.bigint()
    const res = await buildTokenCache({ dataset: 'brown', tokenizer: fresh, name: `brown-gpt2-${r}`, prefix })
    times.push(Number(process.hrtime.bigint() - t0) / 1e9)
    if (res.reused) throw new Error('token cache was reused')
  }
  emit({ bench, metric: 'token_cache_build_mb_per_s', value: brownBytes / MB / median(times), unit: 'MB/s' })
} finally {
  rmSync(root, { recursive: true, force: true })
}

// 3. BPE training (last: it leaves the most garbage behind), 16k vocabulary.
const trainRuns = Number(process.env.DATAKIT_BENCH_TRAIN_RUNS ?? 1)
const t10 = median(
  Array.from({ length: trainRuns }, () =>
    timeOnce(() => trainBpe(tenMb, { vocabSize: 16_000, specialTokens: ['<|endoftext|>'] })),
  ),
)
emit({ bench, metric: 'bpe_train_16k_10mb_s', value: t10, unit: 's' })
emit({ bench, metric: 'bpe_train_16k_10mb_mb_per_s', value: size / MB / t10, unit: 'MB/s' })
const tBrown = median(
  Array.from({ length: trainRuns }, () =>
    timeOnce(() => trainBpe(paragraphs, { vocabSize: 16_000, specialTokens: ['<|endoftext|>'] })),
  ),
)
emit({ bench, metric: 'bpe_train_16k_brown_6mb_s', value: tBrown, unit: 's' })
