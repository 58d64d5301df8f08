/**
 * @module The forward and backward pass of one tensor-parallel member, stage by stage.
 *
 * A model is cut where the members must talk: the embedding (replicated), then per block an
 * attention stage and an MLP stage (each split over the model axis: every member computes its
 * heads or its MLP columns, and the stage's outputs add up over the axis), then the head and the
 * loss (replicated); each architecture defines its own (models/stages.ts). Between stages the
 * outputs are all-reduced over `model`; in the backward pass each split stage is run again under
 * `tf.grads` (activation recomputation) and the gradient of its input is all-reduced the same way.
 * The model axis's first member adds the residual and the replicated biases, so the sum over
 * members counts them once.
 */
import * as tf from '@tensorflow/tfjs'
import type { Batch } from '../data/batch.js'
import { sliceBatch } from '../data/batch.js'
import { maskedCrossEntropy } from '../loss.js'
import { batchTensors } from '../train-step.js'
import { LevanterError } from '../errors.js'
import type { ModelConfig } from '../models/config.js'
import { architectureOf } from '../models/registry.js'
import type { Stage, Stages } from '../models/stages.js'

export type { Stage, Stages } from '../models/stages.js'

/** Sums a float buffer over the model axis (identical bits on every member). */
export type ModelAllReduce = (x: Float32Array) => Promise<Float32Array>

/** The stages of `config` for a member of `model` (`lead`: its model coordinate is 0), from its architecture. */
export function stagesOf(config: ModelConfig, model: number, lead: boolean): Stages {
  const arch = architectureOf(config.type)
  if (!arch.stages)
    throw new LevanterError(
      'BAD_CONFIG',
      `architecture "${config.type}" defines no tensor-parallel stages; train it with mesh.model 1`,
    )
  return arch.stages(config, model, lead)
}

/**
 * Where a stage's weights come from: held whole (`acquire` gives the variables) or gathered from
 * shards for the stage and dropped after it (fsdp). `acquire` is called in the same order on every
 * member, one stage ahead of the computation (the next stage's weights travel while this one runs).
 */
export type StageWeights = {
  acquire(names: readonly string[]): Promise<tf.Tensor[]>
  release(weights: tf.Tensor[]): void
}

/** Weights held whole, by name. */
export const heldWeights = (params: ReadonlyMap<string, tf.Tensor>): StageWeights => ({
  acquire: async (names) => names.map((n) => params.get(n)!),
  release: () => {},
})

/**
 * Takes a stage's weight gradients as the backward pass produces them, and disposes them; the pass
 * awaits it (the values are read asynchronously, as a device backend requires). Called in the same
 * order on every member.
 */
export type GradSink = (names: readonly string[], grads: tf.Tensor[]) => Promise<void>

/** Each gradient's values (asynchronous reads), the tensors disposed. */
export async function readGrads(grads: tf.Tensor[]): Promise<Float32Array[]> {
  try {
    return (await Promise.all(grads.map((g) => g.data()))) as Float32Array[]
  } finally {
    tf.dispose(grads)
  }
}

/** A sink that sums gradients by name into `into`. */
export function sumInto(into: Map<string, Float32Array>): GradSink {
  return async (names, gs) => {
    const ds = await readGrads(gs)
    names.forEach((n, i) => {
      const d = ds[i]!
      const acc = into.get(n)
      if (acc) for (let j = 0; j < acc.length; j++) acc[j]! += d[j]!
      else into.set(n, d.slice())
    })
  }
}

async function reduced(t: tf.Tensor, allReduce: ModelAllReduce | null): Promise<tf.Tensor> {
  if (!allReduce) return t
  const sum = await allReduce((await t.data()) as Float32Array)
  const out = tf.tensor(sum, t.shape)
  t.dispose()
  return out
}

/** Runs `stages` in order, each with its weights acquired one stage ahead and released after it. */
async function* withWeights(stages: readonly Stage[], w: StageWeights): AsyncGenerator<[Stage, tf.Tensor[]]> {
  let next = stages.length ? w.acquire(stages[0]!.names) : undefined
  for (let i = 0; i < stages.length; i++) {
    const ws = await next!
    next = i + 1 < stages.length ? w.acquire(stages[i + 1]!.names) : undefined
    try {
      yield [stages[i]!, ws]
    } finally {
      w.release(ws)
    }
  }
}

/** A stage's auxiliary loss, each row's weighted by `rows` [B] (its masked tokens over the denominator). */
const auxOf = (b: Stage, x: tf.Tensor, w: tf.Tensor[], rows: tf.Tensor): tf.Scalar => tf.sum(tf.mul(b.aux!(x, w), rows))

/** ids → the last block's output, keeping each block's input (for the backward pass) when `keep` is given; with
 * `rows` (see {@link auxOf}) the blocks' auxiliary losses summed into `aux`. */
async function runBlocks(
  s: Stages,
  weights: StageWeights,
  ids: tf.Tensor,
  allReduce: ModelAllReduce | null,
  keep?: tf.Tensor[],
  rows?: tf.Tensor,
): Promise<{ x: tf.Tensor; aux?: tf.Scalar }> {
  const ew = await weights.acquire(s.embed.names)
  let x = tf.tidy(() => s.embed.fn(ids, ew))
  let aux: tf.Scalar | undefined
  weights.release(ew)
  for await (const [b, w] of withWeights(s.blocks, weights)) {
    const input = x
    const y = tf.tidy(() => b.fn(input, w))
    if (b.aux && rows) {
      const prev = aux
      aux = tf.tidy(() => (prev ? tf.add(prev, auxOf(b, input, w, rows)) : auxOf(b, input, w, rows)) as tf.Scalar)
      prev?.dispose()
    }
    if (keep) keep.push(input)
    else input.dispose()
    x = b.split ? await reduced(y, allReduce) : y
  }
  return aux ? { x, aux } : { x }
}

/**
 * The loss of `batch` (Σ over microbatches of Σ mask·nll / denominator), its weight gradients handed
 * to `sink` stage by stage (last stage first) as the backward pass produces them. Gradients of
 * replicated parameters used inside split stages are this member's parts (see layout.ts
 * `partialGradient`); the caller sums them over the model axis. `allReduce` null: no model axis.
 */
export async function tensorParallelGrads(
  s: Stages,
  weights: StageWeights,
  batch: Batch,
  denominator: number,
  microbatches: number,
  allReduce: ModelAllReduce | null,
  sink: GradSink,
): Promise<number> {
  let loss = 0
  const per = Math.ceil(batch.batchSize / microbatches)
  for (let from = 0; from < batch.batchSize; from += per) {
    const { ids, targets, mask } = batchTensors(sliceBatch(batch, from, Math.min(batch.batchSize, from + per)))
    const inputs: tf.Tensor[] = []
    const rows = tf.tidy(() => tf.div(tf.sum(mask, 1), denominator))
    const { x: top, aux } = await runBlocks(s, weights, ids, allReduce, inputs, rows)
    if (aux) {
      loss += (await aux.data())[0]!
      aux.dispose()
    }
    // head and loss: value and gradients of its input and weights
    const hw = await weights.acquire(s.head.names)
    const head = tf.tidy(() => {
      const { value, grads: g } = tf.valueAndGrads((x: tf.Tensor, ...w: tf.Tensor[]) =>
        maskedCrossEntropy(s.head.fn(x, w), targets, mask, denominator),
      )([top, ...hw])
      return { value, dx: g[0]!, gw: g.slice(1) }
    })
    weights.release(hw)
    top.dispose()
    loss += (await head.value.data())[0]!
    head.value.dispose()
    await sink(s.head.names, head.gw)
    let dx = head.dx
    let i = s.blocks.length
    for await (const [b, w] of withWeights([...s.blocks].reverse(), weights)) {
      const x = inputs[--i]!,
        dy = dx
      // with an auxiliary loss: the gradient of Σ fn·dy + aux (the same as dy's alone without it)
      const g = tf.tidy(() =>
        b.aux
          ? tf.grads((xx: tf.Tensor, ...ww: tf.Tensor[]) =>
              tf.add(tf.sum(tf.mul(b.fn(xx, ww), dy)), auxOf(b, xx, ww, rows)),
            )([x, ...w])
          : tf.grads((xx: tf.Tensor, ...ww: tf.Tensor[]) => b.fn(xx, ww))([x, ...w], dy),
      )
      x.dispose()
      dy.dispose()
      await sink(b.names, g.slice(1))
      dx = b.split ? await reduced(g[0]!, allReduce) : g[0]!
    }
    const ew = await weights.acquire(s.embed.names)
    const ge = tf.tidy(() => tf.grads((...w: tf.Tensor[]) => s.embed.fn(ids, w))(ew, dx))
    weights.release(ew)
    await sink(s.embed.names, ge)
    tf.dispose([dx, ids, targets, mask, rows])
  }
  return loss
}

/** Mean masked loss of `batch` (no gradients). */
export async function tensorParallelLoss(
  s: Stages,
  weights: StageWeights,
  batch: Batch,
  allReduce: ModelAllReduce | null,
): Promise<number> {
  const { ids, targets, mask } = batchTensors(batch)
  const { x: top } = await runBlocks(s, weights, ids, allReduce)
  const hw = await weights.acquire(s.head.names)
  const value = tf.tidy(() => maskedCrossEntropy(s.head.fn(top, hw), targets, mask))
  weights.release(hw)
  tf.dispose([top, ids, targets, mask])
  try {
    return (await value.data())[0]!
  } finally {
    value.dispose()
  }
}
