/**
 * @module Pipeline: dataset + model + trainer → a training run that resumes from its newest
 * checkpoint, logs, evaluates and checkpoints through the trainer's hooks.
 */
import { withClient } from '@marin/fray'
import { localMarinPrefix, logger } from '@marin/rigging'
import path from 'node:path'
import { initBackend } from './backend.js'
import type { BackendInfo } from './backend.js'
import { Checkpointer } from './checkpoint/checkpointer.js'
import type { DamagedCheckpoint } from './checkpoint/checkpointer.js'
import type { Dataset } from './data/dataset.js'
import type { MixtureDataset } from './data/mixture.js'
import { LocalEngine } from './engine.js'
import type { Engine, StepResult } from './engine.js'
import { isLevanterError, LevanterError } from './errors.js'
import { measurePeakFlops } from './flops.js'
import { bf16Kernel, setMatmulPrecision } from './kernels/native-gemm.js'
import { nativeKernels } from './kernels/native-ops.js'
import type { CausalLM } from './models/lm.js'
import { learningRateAt } from './optim/schedule.js'
import { bounded, FAILED_STOP_MS } from './parallel/failed-members.js'
import { explainOutOfMemory } from './parallel/heap-limit.js'
import { checkModelAxis } from './parallel/layout.js'
import { MeshEngine } from './parallel/mesh-engine.js'
import { placementClient } from './parallel/placement.js'
import { ProgressTracker } from './progress-tracker.js'
import { JsonlTracker } from './trackers.js'
import type { Tracker } from './trackers.js'
import type { StepInfo, Trainer } from './trainer.js'

const log = logger('levanter')

export type PipelineOptions = {
  /** One dataset, or a weighted mixture of several (`Dataset.mixture`): eval loss and tokens per source too. */
  readonly dataset: Dataset | MixtureDataset
  readonly model: CausalLM
  readonly trainer: Trainer
  readonly maxSteps: number
}

/** What `run` returns. */
export type RunResult = {
  readonly step: number
  readonly losses: readonly number[]
  readonly resumedFrom: number
  /** Newer checkpoints skipped at resume because their files were damaged (each also logged as a warning). */
  readonly damagedCheckpoints: readonly DamagedCheckpoint[]
  readonly last?: StepInfo
  /** The backend the run trained on (with its GPU adapter on webgpu); checkpoints record it too. */
  readonly backend: BackendInfo
}

/**
 * @example
 * await new Pipeline({ dataset: Dataset.fromDatakit(cache), model: new Gpt2LM({ vocabSize: 512 }),
 *                      trainer: new Trainer({ learningRate: 1e-4, optimizer: 'adamw' }), maxSteps: 1000 }).run()
 */
export class Pipeline {
  /** The step executor while `run` is in progress (a `MeshEngine` over more than one process, or with fsdp). */
  engine: Engine | undefined

  constructor(readonly options: PipelineOptions) {
    if (!(Number.isInteger(options.maxSteps) && options.maxSteps > 0)) {
      throw new LevanterError('BAD_CONFIG', `pipeline: maxSteps ${options.maxSteps} must be a positive integer`)
    }
    if (typeof (options.dataset as Partial<Dataset> | undefined)?.trainBatch !== 'function')
      throw new LevanterError(
        'BAD_CONFIG',
        "pipeline: dataset has no trainBatch; pass levanter's Dataset.fromDatakit(tokenCache) (or Dataset.mixture), " +
          "not datakit's Dataset.fromDatakit(name), which yields a dataset's text records for zephyr",
      )
    checkModelAxis(options.model.config, options.trainer.config.mesh.model)
  }

  /** Train from the newest checkpoint (or step 0) to `maxSteps`; the model ends up holding the trained weights. */
  async run(): Promise<RunResult> {
    const backend = await initBackend()
    const { dataset, model, trainer, maxSteps } = this.options
    const c = trainer.config
    const seqLen = model.config.seqLen
    // Without trackers of the trainer's own: metrics.jsonl in the run folder (under the Marin prefix unless runDir
    // says), and the progress lines a marin training step shows (added once the step it resumes from is known).
    const trackers: Tracker[] = trainer.trackers
      ? [...trainer.trackers]
      : [
          new JsonlTracker(
            path.join(c.runDir ?? path.join(localMarinPrefix(), 'levanter-runs', c.runName), 'metrics.jsonl'),
          ),
        ]
    const ckpt = c.checkpointStore
      ? await Checkpointer.open({
          store: c.checkpointStore,
          run: c.runName,
          keepEvery: c.keepEvery,
          keepLatest: c.keepLatest,
        })
      : undefined
    const adamw = { beta1: c.beta1, beta2: c.beta2, eps: c.eps, weightDecay: c.weightDecay, maxGradNorm: c.maxGradNorm }
    const members = c.mesh.data * c.mesh.model
    // a mesh's members set it around their own calls (mesh-replica.ts), each on its own native addon
    if (c.precision === 'bf16' && !nativeKernels())
      throw new LevanterError(
        'BAD_CONFIG',
        'trainer config: precision bf16 runs on the native bf16 GEMM: ' +
          `the ${backend.name} backend does not run the native GEMM; use the wasm backend or precision fp32`,
      )
    if (c.precision === 'bf16' && bf16Kernel() === 'emulated')
      log.warn(
        { precision: 'bf16', kernel: 'emulated' },
        'precision bf16: this CPU lacks AVX512_BF16, so the products are emulated on AVX2 FMAs ' +
          "(bf16 operands, float32 sums: vdpbf16ps's numbers, no faster than fp32)",
      )
    // mesh members follow a webgpu driver onto the device (parallel/mesh-replica.ts)
    const makeEngine = async (): Promise<Engine> =>
      members === 1 && !c.fsdp
        ? new LocalEngine(model, adamw, c.microbatches)
        : await MeshEngine.create(model, adamw, {
            mesh: c.mesh,
            fsdp: c.fsdp,
            microbatches: c.microbatches,
            precision: c.precision,
          })
    const placement = members > 1 || c.fsdp ? placementClient(c.placement) : undefined
    const engine = placement
      ? await withClient(placement, makeEngine).catch(async (err: unknown) => {
          await placement.shutdown()
          throw err
        })
      : await makeEngine()
    this.engine = engine
    const shapes = new Map([...model.params].map(([k, v]) => [k, v.shape]))
    const peak = c.peakFlops ?? (await measurePeakFlops()) * members
    const flopsPerToken = model.flopsPerToken(seqLen)
    // parameters + AdamW moments, 12 bytes a float, on each member (or this process)
    const ownedBytes = engine.ownedBytesPerMember()
    const losses: number[] = []
    let start = 0,
      last: StepInfo | undefined,
      damagedCheckpoints: readonly DamagedCheckpoint[] = [],
      failure: unknown
    // The products' precision is one setting per process (the native addon's), and an experiment may run several
    // pipelines in one process side by side: it is set around this run's own engine calls only, for their
    // synchronous part (a one-process engine runs a step's or an evaluation's products before its first await),
    // and put back at once, so a bf16 run never leaves bf16 on for a fp32 run beside it (nor the reverse).
    const precise = <T>(call: () => Promise<T>): Promise<T> => {
      if (c.precision !== 'bf16') return call()
      const before = setMatmulPrecision('bf16')
      try {
        return call()
      } finally {
        setMatmulPrecision(before)
      }
    }
    try {
      // a mesh's members read their own parts of a sharded checkpoint
      const store = c.checkpointStore
      const shards = engine.shards
      const saved =
        ckpt && store && shards ? await ckpt.loadInto((src) => shards.loadShards(store, src)) : await ckpt?.load()
      if (saved) {
        if (saved.tensors) await engine.load(saved.tensors)
        start = saved.manifest.step
        damagedCheckpoints = saved.damaged
        log.info(
          {
            step: start,
            artifact: ckpt!.artifact,
            ...(saved.damaged.length ? { skippedDamaged: saved.damaged.map((d) => d.step) } : {}),
          },
          'resumed from checkpoint',
        )
      }
      if (!trainer.trackers)
        trackers.push(new ProgressTracker({ maxSteps, startStep: start, tokensPerStep: c.batchSize * seqLen }))
      // On a device the step's loss stays there until a step that logs, evaluates, checkpoints or runs a hook; the
      // steps between are read with it, in one read, and share the interval's time.
      const readsAt = (step: number) =>
        step % c.logEvery === 0 ||
        step === maxSteps ||
        (c.evalEvery > 0 && step % c.evalEvery === 0) ||
        (ckpt !== undefined && c.checkpointEvery > 0 && step % c.checkpointEvery === 0) ||
        trainer.hooks.some((h) => step % h.every === 0)
      let since: number | undefined // when the first step not read yet started
      for (let s = start; s < maxSteps; s++) {
        const batch = await dataset.trainBatch(s, c.batchSize, seqLen, c.seed)
        const lr = learningRateAt(c.schedule, c.learningRate, s, maxSteps)
        const t0 = (since ??= performance.now())
        let results: StepResult[]
        if (engine.stepDeferred && engine.readPending) {
          await precise(() => engine.stepDeferred!(batch, lr))
          if (!readsAt(s + 1)) continue
          results = await engine.readPending()
        } else
          results = [
            await precise(() => engine.step(batch, lr)).catch((err: unknown) => {
              throw members === 1 ? explainOutOfMemory(err, model.numParams()) : err
            }),
          ]
        const seconds = (performance.now() - t0) / 1000 / results.length
        since = undefined
        results.forEach(({ loss }, i) => {
          if (!Number.isFinite(loss))
            throw new LevanterError(
              'NON_FINITE_LOSS',
              `step ${s + 2 - results.length + i}: loss is ${loss}; lower the learning rate or check the data`,
            )
          losses.push(loss)
        })
        const { loss, gradNorm } = results.at(-1)!
        const tokensPerSec = (batch.batchSize * seqLen) / seconds
        const flopsPerSec = tokensPerSec * flopsPerToken
        const info: StepInfo = {
          step: s + 1,
          loss,
          lr,
          gradNorm,
          tokensPerSec,
          flopsPerSec,
          mfu: flopsPerSec / peak,
          seconds,
        }
        last = info
        const metrics: Record<string, number> = {
          'train/loss': loss,
          'train/lr': lr,
          'train/grad_norm': gradNorm,
          'throughput/tokens_per_sec': tokensPerSec,
          'throughput/mfu': info.mfu,
          'memory/params_and_adamw_bytes_per_member': ownedBytes,
        }
        if (info.step % c.logEvery === 0 || info.step === maxSteps) {
          if ('consumed' in dataset)
            for (const [name, rows] of Object.entries(dataset.consumed(info.step, c.batchSize, c.seed)))
              metrics[`data/${name}/tokens`] = rows * seqLen
          for (const t of trackers) await t.log(info.step, metrics)
        }
        if (c.evalEvery > 0 && (info.step % c.evalEvery === 0 || info.step === maxSteps)) {
          let sum = 0
          for (let i = 0; i < c.evalBatches; i++) {
            const b = await dataset.evalBatch(i, c.batchSize, seqLen)
            sum += await precise(() => engine.evalLoss(b))
          }
          const evalLoss = sum / c.evalBatches
          const ev: Record<string, number> = { 'eval/loss': evalLoss }
          const bpt = dataset.bytesPerToken
          if (bpt) ev['eval/bpb'] = evalLoss / Math.LN2 / bpt
          if ('evalSets' in dataset)
            for (const { name, dataset: source } of dataset.evalSets()) {
              if (source.sequences(seqLen).eval === 0) continue
              let part = 0
              for (let i = 0; i < c.evalBatches; i++) {
                const b = await source.evalBatch(i, c.batchSize, seqLen)
                part += await precise(() => engine.evalLoss(b))
              }
              ev[`eval/${name}/loss`] = part / c.evalBatches
              if (source.bytesPerToken) ev[`eval/${name}/bpb`] = part / c.evalBatches / Math.LN2 / source.bytesPerToken
            }
          for (const t of trackers) await t.log(info.step, ev)
        }
        if (ckpt && c.checkpointEvery > 0 && (info.step % c.checkpointEvery === 0 || info.step === maxSteps)) {
          const manifest = {
            step: info.step,
            dataPosition: info.step * c.batchSize,
            rng: { seed: c.seed },
            optimizerCount: 0,
            config: { model: model.config, trainer: c, backend },
            metrics,
          }
          if (shards && store) {
            // every member writes its own parts into the version
            const blobs = await shards.writeShards(store)
            await ckpt.saveShards({ ...manifest, optimizerCount: blobs[0]!.count }, shards.checkpointLayout(), blobs)
          } else {
            const tensors = await engine.state()
            await ckpt.save({ ...manifest, optimizerCount: tensors.count }, tensors, shapes)
          }
        }
        for (const h of trainer.hooks) if (info.step % h.every === 0) await h.run(info)
      }
      if (!engine.inPlace)
        await engine.state().then((st) => {
          for (const [n, d] of st.weights) model.set(n, d)
        })
    } catch (err) {
      failure = err
      throw err
    } finally {
      // the engine waits for a failed member a few seconds at most (parallel/failed-members.ts)
      await engine.close()
      if (placement) {
        // so does the placement's own shutdown, which stops every actor it started again
        const shutdown = placement.shutdown()
        if (isLevanterError(failure, 'REPLICA_FAILED')) await bounded(shutdown, FAILED_STOP_MS)
        else await shutdown
      }
      ckpt?.close()
      for (const t of trackers) await t.close?.()
    }
    return {
      step: Math.max(start, maxSteps),
      losses,
      resumedFrom: start,
      damagedCheckpoints,
      ...(last ? { last } : {}),
      backend,
    }
  }
}
