/**
 * bf16 against fp32 on the quickstart's data: the quickstart's GPT-2 (2 × 128, vocabulary 512, context 128,
 * batch 16, 300 steps, its schedule) trained twice on the same Brown token cache, once with `precision: 'fp32'`
 * and once with `precision: 'bf16'` (bf16 operands in the matrix products, float32 sums, master weights and AdamW),
 * in one process each. Prints the two loss curves at every logged step and their largest relative gap, and exits 1
 * when a gap is over 2%. The data steps are the quickstart's own, so a prefix that ran the quickstart skips them.
 *
 *   node --import tsx experiments/bf16-curve.ts        (BF16_CURVE_STEPS=100 for a shorter run)
 *
 * Needs levanter's native kernels (elsewhere the bf16 step fails naming why); on a CPU without AVX512_BF16 the bf16
 * products are emulated (native/gemm-bf16-emu.cc: vdpbf16ps's arithmetic on AVX2 FMAs, no faster than fp32).
 */
import { Experiment, runIfMain, trainStep } from '@marin/marin'
import type { ExperimentRecord } from '@marin/marin'
import { openStorage } from '@marin/rigging'
import { deduped, quickstartScale, raw, text, tokens } from './quickstart.js'

const steps = Number(process.env.BF16_CURVE_STEPS ?? 300)
if (!Number.isInteger(steps) || steps < 25) {
  console.error(`BF16_CURVE_STEPS=${process.env.BF16_CURVE_STEPS}: give a whole number of steps, 25 or more`)
  process.exit(2)
}
const { mesh: _mesh, ...trainer } = quickstartScale.trainer as Record<string, unknown>
const trainAt = (precision: 'fp32' | 'bf16') =>
  trainStep(tokens, {
    name: `gpt-brown-${precision}`,
    model: quickstartScale.model,
    trainer: { ...trainer, precision, evalEvery: steps, checkpointEvery: steps },
    maxSteps: steps,
  })
const fp32 = trainAt('fp32')
const bf16 = trainAt('bf16')

const experiment = new Experiment({
  name: 'bf16-curve',
  description: "the quickstart's model trained in fp32 and in bf16 on the same tokens; their loss curves compared",
  steps: [text, raw, deduped, tokens, fp32, bf16],
})
export default experiment

const record = await runIfMain(import.meta.url, experiment)
if (record?.status === 'SUCCESS') process.exitCode = await compare(record)

/** Both runs' loss at each logged step; 1 when any relative gap is over 2%. */
async function compare(record: ExperimentRecord): Promise<number> {
  const curve = async (name: string) => {
    const out = await openStorage(record.steps.find((s) => s.name === name)!.outputPath)
    const rows = (await out.readText('metrics.jsonl'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { step: number; 'train/loss'?: number })
    return new Map(rows.flatMap((r) => (r['train/loss'] === undefined ? [] : [[r.step, r['train/loss']!]])))
  }
  const [a, b] = [await curve('gpt-brown-fp32'), await curve('gpt-brown-bf16')]
  let worst = 0
  console.log('step   fp32 loss  bf16 loss  gap')
  for (const [step, la] of a) {
    const lb = b.get(step)
    if (lb === undefined) continue
    const gap = Math.abs(lb - la) / Math.abs(la)
    worst = Math.max(worst, gap)
    console.log(`${String(step).padStart(4)}   ${la.toFixed(4)}     ${lb.toFixed(4)}     ${(100 * gap).toFixed(2)}%`)
  }
  console.log(
    JSON.stringify({
      bench: 'levanter',
      metric: `bf16_loss_max_rel_gap_${steps}_steps`,
      value: worst,
      unit: 'fraction',
    }),
  )
  return worst <= 0.02 && a.size > 0 ? 0 : 1
}
