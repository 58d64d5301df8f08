/** @module Keys and values of earlier positions, per layer, for incremental decoding. */
import * as tf from '@tensorflow/tfjs'

/** One layer's cached keys and values, [B, H, S, K] each. */
export type LayerKv = { readonly k: tf.Tensor; readonly v: tf.Tensor }

/** The cache the model reads and extends; `length` is the number of positions it holds. */
export class KvCache {
  layers: LayerKv[] = []
  length = 0

  /** Append this step's keys/values (they are kept alive; the old ones are freed). */
  update(next: readonly LayerKv[], added: number): void {
    for (const kv of next) {
      tf.keep(kv.k)
      tf.keep(kv.v)
    }
    this.dispose()
    this.layers = [...next]
    this.length += added
  }

  /** Free every cached tensor. */
  dispose(): void {
    for (const { k, v } of this.layers) {
      k.dispose()
      v.dispose()
    }
    this.layers = []
  }
}
