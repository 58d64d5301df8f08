/** @module What a model's parameters are: name, shape and init rule. */

/** `std` draws N(0, std²); `ones`/`zeros` fill. Names follow the Hugging Face module paths. */
export type ParamSpec = {
  readonly name: string
  readonly shape: readonly number[]
  readonly init: { readonly std: number } | 'ones' | 'zeros'
  /** Weight decay applies (matrices and embeddings; never norms or biases). */
  readonly decay: boolean
}

export const mat = (name: string, shape: readonly number[], std: number): ParamSpec => ({
  name,
  shape,
  init: { std },
  decay: true,
})
export const ones = (name: string, n: number): ParamSpec => ({ name, shape: [n], init: 'ones', decay: false })
export const zeros = (name: string, n: number): ParamSpec => ({ name, shape: [n], init: 'zeros', decay: false })
