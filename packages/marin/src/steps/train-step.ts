/**
 * @module The training step: a levanter model trained on the token cache another step made,
 * checkpointed to finestore as it goes (a killed step resumes from its newest checkpoint), then
 * exported with its tokenizer as the model artifact `models/<name>` that `marin serve` and
 * `marin eval` load directly. The export is written straight into the artifact's transaction, and
 * the tokenizer is the token cache's own blob: nothing goes through a folder.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { prefixDir } from '@marin/rigging'
import type { TokenCache as TokenCacheType } from '@marin/datakit'
import type { ModelConfigInput, TrainerConfigInput } from '@marin/levanter'
import { trainerConfigIssues } from '@marin/levanter/config'
import { MarinError } from '../errors.js'
import type { ArtifactRef } from '../executor/artifacts.js'
import { step, type Step } from '../executor/step.js'
import { versioned } from '../executor/versioned.js'
import { prepareOutput, publishFolder, writeArtifacts } from './artifacts.js'
import {
  isMixtureInput,
  mixtureConfig,
  normalizedStages,
  type MixtureSummary,
  type ResolvedMixture,
  type TrainMixtureInput,
} from './train-mixture.js'

export type { MixtureSummary, TrainMixtureInput } from './train-mixture.js'

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
  /** For a mixture: its sources, stages, and the tokens and held-out loss of each source. */
  readonly mixture?: MixtureSummary
}

/** Token frequencies of `tokens`, summing to 1. */
function frequencies(tokens: Int32Array, vocabSize: number): Float64Array {
  const p = new Float64Array(vocabSize)
  for (let i = 0; i < tokens.length; i++) p[tokens[i]!]!++
  for (let i = 0; i < vocabSize; i++) p[i]! /= Math.max(1, tokens.length)
  return p
}

/** Entropy (nats) of the frequencies `p`. */
function entropy(p: Float64Array): number {
  let h = 0
  for (const q of p) if (q > 0) h -= q * Math.log(q)
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
 * Trains `o.model` on the token cache `data` made, or on a weighted mixture of several
 * (`{ mixture: { web: tokA, wiki: tokB }, weights: { web: 0.7, wiki: 0.3 } }`, see {@link TrainMixtureInput}:
 * levanter's `Dataset.mixture`, every source tokenized with one tokenizer), with `o.trainer`
 * (`mesh: { data, model }` and `fsdp` train over data × model fray worker processes: replicated or fsdp over
 * `data`, tensor parallel over `model`). Writes `metrics.jsonl`, TensorBoard event files in `tensorboard/`,
 * and `artifacts.json` = `models/<name>@v`, `checkpoints/<run>`, a {@link TrainSummary} and the tensor backend.
 * @example trainStep(tokens, { name: 'gpt-brown', model: { type: 'gpt2', vocabSize: 512, seqLen: 128 }, trainer: {
 * batchSize: 16, mesh: { data: 2 } }, maxSteps: 500 })
 * @example trainStep({ mixture: { web: webTokens, brown: brownTokens }, weights: [{ untilStep: 100, weights:
 * { web: 0.2, brown: 0.8 } }, { weights: { web: 0.5, brown: 0.5 } }] }, { name: 'gpt-mix', … })
 */
export function trainStep(data: Step | TrainMixtureInput, o: TrainStepOptions): Step {
  if (!(Number.isInteger(o.maxSteps) && o.maxSteps > 0))
    throw new MarinError('BAD_STEP', `step ${o.name}: maxSteps ${o.maxSteps} must be a positive integer`)
  checkTrainer(o.name, o.trainer)
  const mixture = isMixtureInput(data) ? mixtureConfig(o.name, data) : undefined
  if (!mixture && typeof (data as Partial<Step> | undefined)?.artifact !== 'function')
    throw new MarinError(
      'BAD_STEP',
      `step ${o.name}: its data is neither a step (a tokenizeStep) nor { mixture: { name: step, … }, weights }`,
    )
  const sources = mixture ? ` on a mixture of ${Object.keys(mixture.sources).join(', ')}` : ''
  return step({
    name: o.name,
    description: `train ${o.model.type ?? 'a model'}${sources} for ${o.maxSteps} steps`,
    config: {
      ...(mixture ? { mixture } : { tokens: (data as Step).artifact() }),
      model: versioned(o.model),
      trainer: versioned(o.trainer),
      maxSteps: versioned(o.maxSteps),
      initSeed: versioned(o.initSeed ?? 0),
      evalFraction: versioned(o.evalFraction ?? 0.02),
      artifact: versioned(`models/${o.name}`),
    },
    fn: async (c, { outputPath, prefix, log }) => {
      const t0 = performance.now()
      await prepareOutput(outputPath)
      const [{ TokenCache }, lv, { openStore, storeUrl }] = await Promise.all([
        import('@marin/datakit'),
        import('@marin/levanter'),
        import('@marin/finestore'),
      ])
      const cfg = c as unknown as { tokens?: ArtifactRef; mixture?: ResolvedMixture }
      // Source name → its token cache ('' for the single cache of a plain training step).
      const inputs: [string, ArtifactRef][] = cfg.mixture ? Object.entries(cfg.mixture.sources) : [['', cfg.tokens!]]
      const caches = new Map<string, TokenCacheType>()
      for (const [source, ref] of inputs) {
        const what = source ? `data.mixture.${source}` : 'its input'
        if (!ref.name.startsWith('token-caches/'))
          throw new MarinError(
            'BAD_STEP',
            `step ${o.name}: ${what} is ${ref.name}@${ref.version}, not a token cache (token-caches/<name>); ` +
              'give it a tokenizeStep',
          )
        caches.set(
          source,
          await TokenCache.open(ref.name.slice('token-caches/'.length), { version: ref.version, prefix }),
        )
      }
      const all = [...caches]
      const cache = all[0]![1]
      // One model, one vocabulary: every source must have been tokenized with the same tokenizer.
      for (const [source, other] of all.slice(1))
        if (other.ledger.tokenizerSha256 !== cache.ledger.tokenizerSha256)
          throw new MarinError(
            'BAD_STEP',
            `step ${o.name}: data.mixture.${source} (${other.ref}) was tokenized with another tokenizer than ` +
              `data.mixture.${all[0]![0]} (${cache.ref}); tokenize every source with one ` +
              `(tokenizeStep(dataset, { name, tokenizer: <the other tokenizeStep> }))`,
          )
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
      // The trackers write local files: into the output when it is a folder, else into a local folder whose files
      // go to the output in the object store once training ends.
      const staged = prefixDir(outputPath) === undefined
      const runDir = staged ? await mkdtemp(join(tmpdir(), `marin-train-${run}-`)) : outputPath
      const memory = new lv.MemoryTracker()
      // A line per logged step: step/max, loss, eval loss (held-out split of these tokens), tokens/s, ETA.
      const progress = new lv.ProgressTracker({ maxSteps: c.maxSteps, log })
      const trainer = new lv.Trainer(
        { ...(c.trainer as TrainerConfigInput), checkpointStore: storeUrl(prefix), runName: run, runDir },
        {
          trackers: [
            new lv.JsonlTracker(join(runDir, 'metrics.jsonl')),
            new lv.TensorBoardTracker(join(runDir, 'tensorboard')),
            memory,
            progress,
          ],
        },
      )
      progress.tokensPerStep = trainer.config.batchSize * model.config.seqLen
      const datasetOf = (tc: TokenCacheType) =>
        lv.Dataset.fromDatakit(tc, { evalFraction: c.evalFraction, eosId: tc.ledger.eos })
      const mix = cfg.mixture
      const dataset = mix
        ? lv.Dataset.mixture(Object.fromEntries(all.map(([n, tc]) => [n, datasetOf(tc)])), {
            weights: mix.weights,
            repeat: mix.repeat,
            ...(mix.blockSize !== undefined ? { blockSize: mix.blockSize } : {}),
          })
        : datasetOf(cache)
      log.info(
        {
          ...(mix ? { caches: Object.fromEntries(all.map(([n, tc]) => [n, tc.ref])) } : { cache: cache.ref }),
          tokens: all.reduce((n, [, tc]) => n + tc.numTokens, 0),
          run,
          parameters: model.numParams(),
          mesh: trainer.config.mesh ?? null,
        },
        'training',
      )
      let result: Awaited<ReturnType<InstanceType<typeof lv.Pipeline>['run']>>
      try {
        result = await new lv.Pipeline({ dataset, model, trainer, maxSteps: c.maxSteps }).run()
        if (staged) await publishFolder(runDir, outputPath)
      } finally {
        if (staged) await rm(runDir, { recursive: true, force: true })
      }

      const store = await openStore({ url: storeUrl(prefix) })
      try {
        const tokenizer = (await store.open(cache.ref)).entry('tokenizer.json')
        const last = (key: string) => memory.rows.findLast((r) => r[key] !== undefined)?.[key] ?? null
        // The frequencies a context-free model would learn: a mixture's, mixed by its last stage's weights.
        const vocab = cache.ledger.vocabSize
        const finalWeights = 'weightsAt' in dataset ? dataset.weightsAt(Number.MAX_SAFE_INTEGER) : { '': 1 }
        const unigram = new Float64Array(vocab)
        for (const [n, tc] of all) {
          const p = frequencies(tc.read(0, tc.numTokens), vocab)
          for (let i = 0; i < vocab; i++) unigram[i]! += finalWeights[n]! * p[i]!
        }
        const seqLen = model.config.seqLen
        const mixture: MixtureSummary | undefined =
          mix && 'consumed' in dataset
            ? {
                sources: Object.fromEntries(all.map(([n, tc]) => [n, tc.ref])),
                stages: normalizedStages(dataset.names, mix.weights),
                repeat: mix.repeat,
                tokensPerSource: Object.fromEntries(
                  Object.entries(dataset.consumed(result.step, trainer.config.batchSize, trainer.config.seed)).map(
                    ([n, rows]) => [n, rows * seqLen],
                  ),
                ),
                evalLossPerSource: Object.fromEntries(dataset.names.map((n) => [n, last(`eval/${n}/loss`)])),
                evalBpbPerSource: Object.fromEntries(dataset.names.map((n) => [n, last(`eval/${n}/bpb`)])),
              }
            : undefined
        const summary: TrainSummary = {
          steps: result.step,
          resumedFrom: result.resumedFrom,
          trainLoss: last('train/loss'),
          evalLoss: last('eval/loss'),
          evalBpb: last('eval/bpb'),
          unigramEntropy: entropy(unigram),
          tokensTrained: result.step * trainer.config.batchSize * model.config.seqLen,
          parameters: model.numParams(),
          seconds: (performance.now() - t0) / 1000,
          ...(mixture ? { mixture } : {}),
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
            // as JSON: a model config's type admits fields of any type (levanter's ModelConfig)
            config: JSON.parse(JSON.stringify({ model: model.config, trainer: trainer.config, maxSteps: c.maxSteps })),
            lineage: [...all.map(([, tc]) => tc.ref), ...checkpoints],
          },
        )
        log.info({ ref: committed.ref, ...summary }, 'trained')
        // The backend levanter trained on (chosen once per process) goes in too, for the report's provenance.
        const backend = await lv.initBackend()
        await writeArtifacts(outputPath, {
          artifacts: [committed.ref, ...checkpoints],
          ...(mix ? {} : { cache: cache.ref }),
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
