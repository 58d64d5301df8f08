/**
 * @module Stages: a model cut where tensor-parallel members must talk (parallel/tensor-parallel.ts
 * runs them). The embedding (replicated), per block its split stages (every member computes its
 * heads or MLP columns; the outputs add up over the model axis), then the head (replicated).
 */
import * as tf from '@tensorflow/tfjs'

/** One stage: `fn(x, weights)` with its weights named in `names`; `split` stages sum over the model axis. `aux`: an
 * auxiliary training loss per row [B] of the stage's input (a router's load-balancing loss), added to the loss as
 * loss.ts `withAuxLoss` weighs it; give it on the model axis's first member only, so it counts once. */
export type Stage = {
  readonly names: readonly string[]
  readonly split: boolean
  readonly fn: (x: tf.Tensor, w: tf.Tensor[]) => tf.Tensor
  readonly aux?: (x: tf.Tensor, w: tf.Tensor[]) => tf.Tensor
}

/** The stages of a model for one member: embedding (input ids), blocks, head (→ logits). */
export type Stages = { readonly embed: Stage; readonly blocks: readonly Stage[]; readonly head: Stage }

/**
 * A split stage's output `partial` with the residual `x` and the replicated bias `b`: the model
 * axis's first member (`lead`) adds them, so the sum over members counts them once.
 */
export const residual = (lead: boolean, x: tf.Tensor, partial: tf.Tensor, b?: tf.Tensor): tf.Tensor => {
  if (!lead) return b ? tf.add(partial, tf.mul(b, 0)) : partial // b stays in the graph: its gradient here is 0
  return tf.add(x, b ? tf.add(partial, b) : partial)
}
