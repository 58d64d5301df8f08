/**
 * @module The keys and values of every running sequence in one tensor per layer, [B, H, S, K],
 * right-aligned: row r's `lengths[r]` positions are the last columns, earlier columns are padding
 * masked out of attention. Rows sit at different positions, yet each decode step appends one
 * column for all rows (a prefill chunk: n columns), and attention over the batch is one product. Rows
 * join (left-padded to the common width) and leave (gathered out; all-padding columns dropped).
 * Keys carry their absolute positions already (learned positions or rotary applied before caching),
 * so where a key is stored does not change attention.
 *
 * A step on tensor ops appends by concatenation (a new tensor of S + n columns). The one-call native step
 * (kernels/native-gemv-decode.ts) grows the cache in place instead: each layer's tensors ({@link BatchCache.storage})
 * are then [B, H, capacity, K], the S columns first and room after them, copied into twice the width when the room
 * runs out, so a step writes its one column where it goes rather than copying the whole cache (GPT-2 small at 16
 * rows and ~60 positions: ~65 MB a step). {@link BatchCache.layers} always answers [B, H, S, K] (a copy of the S
 * columns where there is room after them).
 */
import * as tf from '@tensorflow/tfjs'

/** One layer's cached keys and values, [B, H, S, K] each. */
export type LayerKv = { readonly k: tf.Tensor; readonly v: tf.Tensor }

const columns = (t: tf.Tensor, from: number, n: number) => tf.slice(t, [0, 0, from, 0], [-1, -1, n, -1])

/** The KV cache of a batch whose rows sit at different positions (one row for a single sequence). */
export class BatchCache {
  /** Per layer [B, H, capacity, K]: the first `width` columns hold the cache, the rest is room to grow in place. */
  private store: LayerKv[] = []
  private cols = 0
  /** The store's first `width` columns, [B, H, S, K], made when asked for while there is room after them. */
  private view: LayerKv[] | undefined
  /** Valid positions per row. */
  lengths: number[] = []

  get rows(): number {
    return this.lengths.length
  }

  /** Columns cached (S). */
  get width(): number {
    return this.cols
  }

  /** Columns the tensors hold: S, or more where the native step grew them with room ({@link storage}). */
  get capacity(): number {
    return this.store[0]?.k.shape[2] ?? 0
  }

  /** Each layer's keys and values, [B, H, S, K]; valid until the cache next changes. */
  get layers(): readonly LayerKv[] {
    if (this.capacity === this.cols) return this.store
    this.view ??= tf.tidy(() =>
      this.store.map((l) => ({ k: columns(l.k, 0, this.cols), v: columns(l.v, 0, this.cols) })),
    )
    return this.view
  }

  /** Add rows from a prefill ([R, H, W, K] per layer, right-aligned, `lengths` valid positions each); takes ownership
   * of `kv`. */
  add(kv: readonly LayerKv[], lengths: readonly number[]): void {
    // A model without attention caches no layers (kv is []): the rows still advance, the width is their longest.
    const width = kv[0]?.k.shape[2] ?? Math.max(0, ...lengths)
    if (this.rows === 0) {
      this.install([...kv], width)
      this.lengths = [...lengths]
      return
    }
    const S = this.width,
      W = Math.max(S, width),
      have = this.layers
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
      have.map((l, i) => ({
        k: tf.concat([padLeft(l.k, W - S), padLeft(kv[i]!.k, W - width)], 0),
        v: tf.concat([padLeft(l.v, W - S), padLeft(kv[i]!.v, W - width)], 0),
      })),
    )
    this.install(next, W)
    for (const l of kv) tf.dispose([l.k, l.v])
    this.lengths.push(...lengths)
  }

  /** Keep only the rows at `keep` (in that order); drop columns that are padding for every row left. */
  keep(keep: readonly number[]): void {
    if (keep.length === 0) return this.dispose()
    const lengths = keep.map((r) => this.lengths[r]!)
    const W = Math.max(...lengths),
      trim = this.width - W
    const same = keep.length === this.rows && keep.every((r, i) => r === i)
    if (same && trim === 0) return
    const next = tf.tidy(() => {
      const idx = tf.tensor1d([...keep], 'int32')
      // from the store: the kept columns [trim, S) of the kept rows, whatever room follows them
      const cut = (t: tf.Tensor) => columns(same ? t : tf.gather(t, idx, 0), trim, W)
      return this.store.map((l) => ({ k: cut(l.k), v: cut(l.v) }))
    })
    this.install(next, W)
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

  /** Install the layers a pass produced (`n` columns wider, [B, H, S+n, K], or with room after them: [B, H, capacity,
   * K] holding the S+n columns first) and advance every row by n. */
  advance(next: LayerKv[], n = 1): void {
    this.install(next, this.cols + n)
    this.lengths = this.lengths.map((l) => l + n)
  }

  /** Each layer's tensors as they lie, [B, H, capacity, K]: the S columns first, then room for a step to write its
   * columns in place ({@link grew}). Room is only ever in tensors the native step made for this cache (a prefill's,
   * a join's or a leave's are exactly S wide), so a write there changes no tensor anyone else holds. */
  get storage(): readonly LayerKv[] {
    return this.store
  }

  /** A step wrote `n` columns into the room after the S columns ({@link storage}): every row advances by n. */
  grew(n: number): void {
    this.dropView()
    this.cols += n
    this.lengths = this.lengths.map((l) => l + n)
  }

  /** Move the rows of `other` in after this cache's rows (a sequence prefilled in a cache of its own joins the
   * batch); `other` is left empty. */
  absorb(other: BatchCache): void {
    if (other.rows === 0) return
    const lengths = other.lengths
    this.add(other.take(), lengths)
  }

  /** The layers [B, H, S, K], owned by the caller now; the cache is left empty. */
  private take(): LayerKv[] {
    const layers = [...this.layers]
    if (layers[0] !== this.store[0])
      this.view = undefined // the copy is the caller's; the store is disposed below
    else this.store = []
    this.dispose()
    return layers
  }

  dispose(): void {
    this.install([], 0)
    this.lengths = []
  }

  private dropView(): void {
    if (this.view) for (const { k, v } of this.view) tf.dispose([k, v])
    this.view = undefined
  }

  private install(next: LayerKv[], width: number): void {
    this.dropView()
    for (const { k, v } of this.store) tf.dispose([k, v])
    this.store = next
    this.cols = width
  }
}
