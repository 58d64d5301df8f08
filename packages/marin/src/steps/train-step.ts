/**
 * @module The training step: a levanter model trained on the token cache another step made,
 * checkpointed to finestore as it goes (a killed step resumes from its newest checkpoint), then
 * exported with its tokenizer as the model artifact `models/<name>` that `marin serve` and
 * `marin eval` load directly. The export is written straight into the artifact's transaction, and
 * the tokenizer is the token cache's own blob: nothing goes through a folder.
 */
import { mkdir } from 'node:fs/promises'
import { basename, join } from 'node:path'
import type { ModelConfigInput, TrainerConfigInput } from '@marin/levanter'
import { trainerConfigIssues } from '@marin/levanter/config'
import { MarinError } from '../errors.js'
import { step, type Step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'
import { writeArtifacts } from './artifacts.js'

/** Trainer settings a step may choose; where checkpoints and metrics go is the step's business. */
export type TrainStepTrainer = Omit<TrainerConfigInput, 'checkpointStore' | 'runName' | 'runDir'>

export type TrainStepOptions = {
  /** Step name and model artifact name (`models/<name>`). */
  readonly name: string
  readonly model: ModelConfigInput
  readonly trainer: TrainStepTrainer
  readonly maxSteps: number
  /** Seed of the initial weights. @default 0 */
  readonly initSeed?: number
  /** Fraction of the token cache held out for evaluation. @default 0.02 */
  readonly evalFraction?: number
}

/** What `artifacts.json` of a training step holds besides the refs. */
export type TrainSummary = {
  readonly steps: number
  readonly resumedFrom: number
  readonly trainLoss: number | null
  readonly evalLoss: number | null
  readonly evalBpb: number | null
  /** Entropy of the cache's token frequencies, in nats per token: the loss of a model that ignores context. */
  readonly unigramEntropy: number
  readonly tokensTrained: number
  readonly parameters: number
  readonly seconds: number
}

/** Entropy (nats) of the frequencies of `tokens`. */
function unigramEntropy(tokens: Int32Array, vocabSize: number): number {
  const counts = new Float64Array(vocabSize)
  for (let i = 0; i < tokens.length; i++) counts[tokens[i]!]!++
  let h = 0
  for (const c of counts) if (c > 0) h -= (c / tokens.length) * Math.log(c / tokens.length)
  return h
}

/** A run name levanter accepts, unique to this step version (its output folder's name). */
const runNameOf = (outputPath: string) =>
  basename(outputPath)
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')

/**
 * The trainer settings, checked when the step is defined with levanter's own schema and rules
 * (`@marin/levanter/config` loads no tfjs; levanter itself loads only when the step runs): every
 * bad field at once, each named as `trainer.<field>`.
 */
function checkTrainer(name: string, t: TrainStepTrainer): void {
  const issues = trainerConfigIssues(t, 'trainer.')
  if (issues.length) throw new MarinError('BAD_CONFIG', `step ${name}: ${issues.join('; ')}`)
}

/**
 * Trains `o.model` on the token cache `tokens` made, with `o.trainer` (`mesh: { data, model }` and
 * `fsdp` train over data × model fray worker processes: replicated or fsdp over `data`, tensor
 * parallel over `model`). Writes `metrics.jsonl`, TensorBoard event files in `tensorboard/`,
 * and `artifacts.json` = `models/<name>@v`, `checkpoints/<run>`, a {@link TrainSummary} and the tensor backend.
 * @example trainStep(tokens, { name: 'gpt-brown', model: { type: 'gpt2', vocabSize: 512, seqLen: 128 }, trainer: {
 * batchSize: 16, mesh: { data: 2 } }, maxSteps: 500 })
 */
export function trainStep(tokens: Step, o: TrainStepOptions): Step {
  if (!(Number.isInteger(o.maxSteps) && o.maxSteps > 0))
    throw new MarinError('BAD_STEP', `step ${o.name}: maxSteps ${o.maxSteps} must be a positive integer`)
  checkTrainer(o.name, o.trainer)
  return step({
    name: o.name,
    description: `train ${o.model.type ?? 'a model'} for ${o.maxSteps} steps`,
    config: {
      tokens: tokens.artifact(),
      model: versioned(o.model),
      trainer: versioned(o.trainer),
      maxSteps: versioned(o.maxSteps),
      initSeed: versioned(o.initSeed ?? 0),
      evalFraction: versioned(o.evalFraction ?? 0.02),
      artifact: versioned(`models/${o.name}`),
    },
    fn: async (c, { outputPath, prefix, log }) => {
      const t0 = performance.now()
      await mkdir(outputPath, { recursive: true })
      const [{ TokenCache }, lv, { openStore, storeUrl }] = await Promise.all([
        import('@marin/datakit'),
        import('@marin/levanter'),
        import('@marin/finestore'),
      ])
      if (!c.tokens.name.startsWith('token-caches/'))
        throw new MarinError(
          'BAD_STEP',
          `step ${o.name}: its input is ${c.tokens.name}@` +
            `${c.tokens.version}, not a token cache (token-caches/<name>); ` +
            `give it a tokenizeStep`,
        )
      const cache = await TokenCache.open(c.tokens.name.slice('token-caches/'.length), {
        version: c.tokens.version,
        prefix,
      })
      const model = lv.createModel(c.model as ModelConfigInput, c.initSeed)
      if (model.config.vocabSize < cache.ledger.vocabSize) {
        throw new MarinError(
          'BAD_CONFIG',
          `step ${o.name}: model.vocabSize ${model.config.vocabSize} is ` +
            `smaller than the tokenizer's ${cache.ledger.vocabSize} ids; ` +
            `raise model.vocabSize`,
        )
      }
      const run = runNameOf(outputPath)
      const memory = new lv.MemoryTracker()
      // A line per logged step: step/max, loss, eval loss (held-out split of these tokens), tokens/s, ETA.
      const progress = new lv.ProgressTracker({ maxSteps: c.maxSteps, log })
      const trainer = new lv.Trainer(
        { ...(c.trainer as TrainerConfigInput), checkpointStore: storeUrl(prefix), runName: run, runDir: outputPath },
        {
          trackers: [
            new lv.JsonlTracker(join(outputPath, 'metrics.jsonl')),
            new lv.TensorBoardTracker(join(outputPath, 'tensorboard')),
            memory,
            progress,
          ],
        },
      )
      progress.tokensPerStep = trainer.config.batchSize * model.config.seqLen
      const dataset = lv.Dataset.fromDatakit(cache, { evalFraction: c.evalFraction, eosId: cache.ledger.eos })
      log.info(
        {
          cache: cache.ref,
          tokens: cache.numTokens,
          run,
          parameters: model.numParams(),
          mesh: trainer.config.mesh ?? null,
        },
        'training',
      )
      const result = await new lv.Pipeline({ dataset, model, trainer, maxSteps: c.maxSteps }).run()

      const store = await openStore({ url: storeUrl(prefix) })
      try {
        const tokenizer = (await store.open(cache.ref)).entry('tokenizer.json')
        const last = (key: string) => memory.rows.findLast((r) => r[key] !== undefined)?.[key] ?? null
        const summary: TrainSummary = {
          steps: result.step,
          resumedFrom: result.resumedFrom,
          trainLoss: last('train/loss'),
          evalLoss: last('eval/loss'),
          evalBpb: last('eval/bpb'),
          unigramEntropy: unigramEntropy(cache.read(0, cache.numTokens), cache.ledger.vocabSize),
          tokensTrained: result.step * trainer.config.batchSize * model.config.seqLen,
          parameters: model.numParams(),
          seconds: (performance.now() - t0) / 1000,
        }
        const ckptVersion = trainer.config.checkpointEvery > 0 ? await store.head(`checkpoints/${run}`) : undefined
        const checkpoints = ckptVersion !== undefined ? [`checkpoints/${run}@${ckptVersion}`] : []
        // The exported model with its tokenizer is what serving and evaluation load.
        const committed = await store.commit(
          c.artifact,
          async (txn) => {
            await lv.exportHf(model, txn)
            await txn.putBlob('tokenizer.json', { hash: tokenizer.blob, size: tokenizer.size })
          },
          {
            metadata: { ...summary, run },
            config: { model: model.config, trainer: trainer.config, maxSteps: c.maxSteps },
            lineage: [cache.ref, ...checkpoints],
          },
        )
        log.info({ ref: committed.ref, ...summary }, 'trained')
        // The backend levanter trained on (chosen once per process) goes in too, for the report's provenance.
        const backend = await lv.initBackend()
        await writeArtifacts(outputPath, {
          artifacts: [committed.ref, ...checkpoints],
          cache: cache.ref,
          ...summary,
          backend,
        })
        return { ref: committed.ref, ...summary }
      } finally {
        store.close()
      }
    },
  })
}
