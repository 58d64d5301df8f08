/**
 * `pnpm bench levanter`: training throughput at the reference config (vocab 512, context 128,
 * 4 layers, 4 heads, d_model 256, MLP 4×, batch 16, AdamW) for the stock tfjs baseline, levanter on
 * one process and levanter data-parallel on two; generation with and without the KV cache.
 * Each variant runs in its own process (bench/variant.ts) so its peak RSS is its own.
 * LEVANTER_BENCH_STEPS sets the timed steps per variant (median reported). @default 3
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { emit } from '@marin/rigging/bench'

const steps = process.env.LEVANTER_BENCH_STEPS ?? '3'
const variantFile = fileURLToPath(new URL('./variant.ts', import.meta.url))

function run(variant: string, n = steps): Record<string, number> {
  process.stderr.write(`levanter bench: ${variant}…\n`)
  const r = spawnSync(process.execPath, ['--import', 'tsx', variantFile, variant, n], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LOG_LEVEL: 'warn' } })
  const line = r.stdout.trim().split('\n').filter((l) => l.startsWith('{"variant"')).pop()
  if (!line) throw new Error(`bench variant ${variant} printed no result (exit ${r.status})`)
  return JSON.parse(line)
}

const stock = run('stock', process.env.LEVANTER_BENCH_STOCK_STEPS ?? '2')
const one = run('levanter')
const two = run('levanter-dp2')
const gen = run('generate')

const b = 'levanter'
emit({ bench: b, metric: 'stock_tfjs_train_tokens_per_s', value: stock.tokensPerSec!, unit: 'tokens/s' })
emit({ bench: b, metric: 'stock_tfjs_model_flops_per_s', value: stock.flopsPerSec!, unit: 'FLOP/s' })
emit({ bench: b, metric: 'stock_tfjs_peak_rss', value: stock.peakRssMiB!, unit: 'MiB' })
emit({ bench: b, metric: 'train_tokens_per_s_1_process', value: one.tokensPerSec!, unit: 'tokens/s', baseline: stock.tokensPerSec! })
emit({ bench: b, metric: 'model_flops_per_s_1_process', value: one.flopsPerSec!, unit: 'FLOP/s', baseline: stock.flopsPerSec! })
emit({ bench: b, metric: 'peak_rss_1_process', value: one.peakRssMiB!, unit: 'MiB', baseline: stock.peakRssMiB!, lowerIsBetter: true })
emit({ bench: b, metric: 'train_tokens_per_s_2_processes', value: two.tokensPerSec!, unit: 'tokens/s', baseline: stock.tokensPerSec! })
emit({ bench: b, metric: 'model_flops_per_s_2_processes', value: two.flopsPerSec!, unit: 'FLOP/s', baseline: stock.flopsPerSec! })
emit({ bench: b, metric: 'peak_rss_per_replica_2_processes', value: two.replicaPeakRssMiB ?? NaN, unit: 'MiB', baseline: stock.peakRssMiB!, lowerIsBetter: true })
emit({ bench: b, metric: 'generate_tokens_per_s_kv_cache', value: gen.cachedTokensPerSec!, unit: 'tokens/s', baseline: gen.uncachedTokensPerSec! })
emit({ bench: b, metric: 'generate_tokens_per_s_no_cache', value: gen.uncachedTokensPerSec!, unit: 'tokens/s' })
