/**
 * @module The keys and values of every running sequence in one tensor per layer, [B, H, S, K],
 * right-aligned: row r's `lengths[r]` positions are the last columns, earlier columns are padding
 * masked out of attention. Rows sit at different positions, yet each decode step appends one
 * column for all rows with a single concat (a prefill chunk: n columns), and attention over the batch is one
 * product. Rows
 * join (left-padded to the common width) and leave (gathered out; all-padding columns dropped).
 * Keys carry their absolute positions already (learned positions or rotary applied before caching),
 * so where a key is stored does not change attention.
 */
import * as tf from '@tensorflow/tfjs'

/** One layer's cached keys and values, [B, H, S, K] each. */
export type LayerKv = { readonly k: tf.Tensor; readonly v: tf.Tensor }

/** The KV cache of a batch whose rows sit at different positions (one row for a single sequence). */
export class BatchCache {
  layers: LayerKv[] = []
  /** Valid positions per row. */
  lengths: number[] = []

  get rows(): number {
    return this.lengths.length
  }

  get width(): number {
    return this.layers[0]?.k.shape[2] ?? 0
  }

  /** Add rows from a prefill ([R, H, W, K] per layer, right-aligned, `lengths` valid positions each); takes ownership
   * of `kv`. */
  add(kv: readonly LayerKv[], lengths: readonly number[]): void {
    if (this.rows === 0) {
      this.layers = [...kv]
      this.lengths = [...lengths]
      return
    }
    const S = this.width,
      width = kv[0]!.k.shape[2]!,
      W = Math.max(S, width)
    const padLeft = (t: tf.Tensor, n: number) =>
      n === 0
        ? tf.clone(t)
        : tf.pad(t, [
            [0, 0],
            [0, 0],
            [n, 0],
            [0, 0],
          ])
    const next = tf.tidy(() =>
      this.layers.map((l, i) => ({
        k: tf.concat([padLeft(l.k, W - S), padLeft(kv[i]!.k, W - width)], 0),
        v: tf.concat([padLeft(l.v, W - S), padLeft(kv[i]!.v, W - width)], 0),
      })),
    )
    this.replace(next)
    for (const l of kv) tf.dispose([l.k, l.v])
    this.lengths.push(...lengths)
  }

  /** Keep only the rows at `keep` (in that order); drop columns that are padding for every row left. */
  keep(keep: readonly number[]): void {
    if (keep.length === 0) return this.dispose()
    const lengths = keep.map((r) => this.lengths[r]!)
    const trim = this.width - Math.max(...lengths)
    const next = tf.tidy(() => {
      const idx = tf.tensor1d([...keep], 'int32')
      const cut = (t: tf.Tensor) => {
        const g = keep.length === this.rows && keep.every((r, i) => r === i) ? t : tf.gather(t, idx, 0)
        return trim > 0 ? tf.slice(g, [0, 0, trim, 0], [-1, -1, -1, -1]) : tf.clone(g)
      }
      return this.layers.map((l) => ({ k: cut(l.k), v: cut(l.v) }))
    })
    this.replace(next)
    this.lengths = lengths
  }

  /**
   * Additive mask [B, 1, n, S+n] for a pass that appends n columns (a decode step: n = 1; a prefill chunk: more):
   * row r's query t sees its cached lengths[r] columns and the chunk's columns up to its own, t.
   */
  extendBias(n: number): tf.Tensor {
    const B = this.rows,
      S = this.width,
      Sn = S + n
    const m = new Float32Array(B * n * Sn)
    this.lengths.forEach((len, r) => {
      for (let t = 0; t < n; t++) {
        const o = (r * n + t) * Sn
        m.fill(-1e9, o, o + S - len)
        m.fill(-1e9, o + S + t + 1, o + Sn)
      }
    })
    return tf.tensor4d(m, [B, 1, n, Sn])
  }

  /** Install the layers a pass produced (`n` columns wider) and advance every row by n. */
  advance(next: LayerKv[], n = 1): void {
    this.replace(next)
    this.lengths = this.lengths.map((l) => l + n)
  }

  /** Move the rows of `other` in after this cache's rows (a sequence prefilled in a cache of its own joins the
   * batch); `other` is left empty. */
  absorb(other: BatchCache): void {
    if (other.rows === 0) return
    const { layers, lengths } = other
    other.layers = []
    other.lengths = []
    this.add(layers, lengths)
  }

  dispose(): void {
    for (const { k, v } of this.layers) tf.dispose([k, v])
    this.layers = []
    this.lengths = []
  }

  private replace(next: LayerKv[]): void {
    for (const { k, v } of this.layers) tf.dispose([k, v])
    this.layers = next
  }
}
