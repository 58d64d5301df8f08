/** @module AdamW with decoupled weight decay, global grad-norm clipping, and state as named tensors for checkpoints. */
import * as tf from '@tensorflow/tfjs'
import { LevanterError } from '../errors.js'
import type { AdamWConfig } from './adamw-config.js'
import { adamwStep, clipScale, squaredNorm, updateOnHost } from './adamw-op.js'
import { heapFloats, writableHeapFloats } from '../kernels/wasm-heap.js'

export { AdamWConfig } from './adamw-config.js'
export type { AdamWConfigInput } from './adamw-config.js'

/**
 * What an optimizer updates: parameters by name, and the names that take weight decay. The map is
 * read at each step (a parameter replaced in it is the one updated next). A `CausalLM` is one
 * (models/lm.ts), and so is any `{ params, decay }` a caller builds: optim/ knows no model.
 */
export type NamedParams = {
  readonly params: ReadonlyMap<string, tf.Variable>
  readonly decay: ReadonlySet<string>
}

/** Global L2 norm of a set of gradients. */
export function globalNorm(grads: Iterable<tf.Tensor>): number {
  return tf.tidy(() => Math.sqrt(tf.addN([...grads].map((g) => tf.sum(tf.square(g)))).dataSync()[0]!))
}

/**
 * Put each saved moment (`m.<param>`, `v.<param>` in `state`) into its holder with `put`, checking
 * its length first (BAD_SHAPE naming it); moments the state lacks are left as they are. The host
 * and the device AdamW both restore through it.
 */
export function loadMoments<T>(
  state: ReadonlyMap<string, Float32Array>,
  moments: { readonly m: ReadonlyMap<string, T>; readonly v: ReadonlyMap<string, T> },
  size: (t: T) => number,
  put: (t: T, d: Float32Array) => void,
): void {
  for (const prefix of ['m', 'v'] as const) {
    for (const [n, t] of moments[prefix]) {
      const d = state.get(`${prefix}.${n}`)
      if (!d) continue
      if (d.length !== size(t))
        throw new LevanterError(
          'BAD_SHAPE',
          `optimizer state "${prefix}.${n}": got ${d.length} values, ` +
            `expected ${size(t)}; check the checkpoint matches the model`,
        )
      put(t, d)
    }
  }
}

/**
 * First and second moments per parameter, plus the update count. The update is the AdamW op
 * (adamw-op.ts) run as one fused pass per parameter over plain arrays (float64 arithmetic, float32
 * storage): one read of the gradient and the parameter and one write of the parameter, instead of
 * a dozen tensor ops per parameter (each a full pass over memory and a kernel dispatch). Where
 * levanter's native kernels run (kernels/native-ops.ts) that pass is native, with the same
 * arithmetic in the same order (the same bits for the same gradient norm).
 */
export class AdamW {
  /** First moments by parameter name. */
  readonly m = new Map<string, Float32Array>()
  /** Second moments by parameter name. */
  readonly v = new Map<string, Float32Array>()
  count = 0
  readonly #decay: ReadonlySet<string>

  readonly #params: ReadonlyMap<string, tf.Variable>

  constructor(
    readonly config: AdamWConfig,
    target: NamedParams,
  ) {
    this.#params = target.params
    for (const [name, p] of target.params) {
      this.m.set(name, new Float32Array(p.size))
      this.v.set(name, new Float32Array(p.size))
    }
    this.#decay = new Set(target.decay)
  }

  /** Clip by global norm, then one AdamW update at `lr`. Returns the norm before clipping. */
  apply(grads: ReadonlyMap<string, tf.Tensor>, lr: number): number {
    const arrays = new Map<string, () => Float32Array>()
    const backend = tf.backend()
    for (const name of this.#params.keys()) {
      const g = grads.get(name)
      // on wasm read in place, the view taken when used (an update that allocates may move the heap)
      if (!g) continue
      const copy = heapFloats(g, backend) ? undefined : (g.dataSync() as Float32Array)
      arrays.set(name, () => copy ?? heapFloats(g, backend)!)
    }
    return this.#update(arrays, lr)
  }

  /** {@link apply} with the gradients as one buffer, parameters in `params` order (as `flattenGrads` lays them
   * out). */
  applyFlat(flat: Float32Array, lr: number): number {
    const arrays = new Map<string, () => Float32Array>()
    let o = 0
    for (const [name, p] of this.#params) {
      const g = flat.subarray(o, o + p.size)
      arrays.set(name, () => g)
      o += p.size
    }
    return this.#update(arrays, lr)
  }

  #update(grads: ReadonlyMap<string, () => Float32Array>, lr: number): number {
    let sq = 0
    for (const g of grads.values()) sq += squaredNorm(g())
    const norm = Math.sqrt(sq)
    const scale = clipScale(this.config, norm)
    const step = adamwStep(this.config, ++this.count, lr)
    for (const [name, p] of this.#params) {
      const gradient = grads.get(name)
      if (!gradient) continue
      // On wasm a parameter no other tensor shares is updated where it lives on the heap; otherwise
      // (cpu's dataSync may return the tensor's own storage) into a new array assigned to it.
      const own = writableHeapFloats(p, tf.backend())
      const old = own?.data ?? (p.dataSync() as Float32Array)
      const out = own?.data ?? new Float32Array(old.length)
      updateOnHost(step, scale, this.#decay.has(name), gradient(), this.m.get(name)!, this.v.get(name)!, old, out)
      if (own) {
        own.written()
        continue
      }
      const t = tf.tensor(out, p.shape)
      p.assign(t)
      t.dispose()
    }
    return norm
  }

  /** Moments by name (`m.<param>`, `v.<param>`), for checkpoints (copies). */
  async state(): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>()
    for (const [n, t] of this.m) out.set(`m.${n}`, t.slice())
    for (const [n, t] of this.v) out.set(`v.${n}`, t.slice())
    return out
  }

  /** Restore moments saved by {@link state}, and the update count. */
  load(state: ReadonlyMap<string, Float32Array>, count: number): void {
    loadMoments(
      state,
      this,
      (t) => t.length,
      (t, d) => t.set(d),
    )
    this.count = count
  }

  /** Nothing to release: the moments are plain arrays. Kept so callers can treat optimizers alike. */
  dispose(): void {}
}
