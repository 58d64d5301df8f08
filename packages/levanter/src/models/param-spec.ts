/** @module What a model's parameters are: name, shape, init rule and how each splits over a mesh's model axis. */

/**
 * How a parameter splits over the model axis (tensor parallelism): `replicated` whole on every
 * member; `column` its last dimension split (`{ column: g }`: in g blocks each split alike, as the
 * q, k and v of a packed projection); `row` its first dimension split; `vocab` the first (vocabulary)
 * dimension of an embedding or head split; `expert` the first (expert) dimension of stacked expert
 * weights split. `vocab` and `expert` lie on the members as `row` does.
 */
export type Shard = 'replicated' | 'column' | 'row' | 'vocab' | 'expert' | { readonly column: number }

/** `std` draws N(0, std²); `ones`/`zeros` fill. Names follow the Hugging Face module paths. */
export type ParamSpec = {
  readonly name: string
  readonly shape: readonly number[]
  readonly init: { readonly std: number } | 'ones' | 'zeros'
  /** Weight decay applies (matrices and embeddings; never norms or biases). */
  readonly decay: boolean
  /** How it splits over the model axis; @default 'replicated' */
  readonly shard?: Shard
}

export const mat = (name: string, shape: readonly number[], std: number, shard: Shard = 'replicated'): ParamSpec => ({
  name,
  shape,
  init: { std },
  decay: true,
  shard,
})
export const ones = (name: string, n: number): ParamSpec => ({ name, shape: [n], init: 'ones', decay: false })
export const zeros = (name: string, n: number, shard: Shard = 'replicated'): ParamSpec => ({
  name,
  shape: [n],
  init: 'zeros',
  decay: false,
  shard,
})
