/**
 * @module Token sampling over one row of logits: log-softmax, the top alternatives OpenAI's
 * `logprobs` asks for, and the temperature / top-k / top-p draw that `generate` and `marin serve`
 * both make. Pure typed-array code: importing it loads no tensor backend.
 */
import type { Rng } from './rng.js'

/** log-softmax of one row of logits (temperature 1: the model's own distribution), into `out` when given. */
export function logSoftmax(x: Float32Array, out = new Float64Array(x.length)): Float64Array {
  const V = x.length
  let max = -Infinity
  for (let i = 0; i < V; i++) if (x[i]! > max) max = x[i]!
  let s = 0
  for (let i = 0; i < V; i++) s += Math.exp(x[i]! - max)
  const lse = max + Math.log(s)
  for (let i = 0; i < V; i++) out[i] = x[i]! - lse
  return out
}

/** The `k` most likely ids with their log-probabilities, best first. */
export function topLogprobs(lp: Float64Array, k: number): [number, number][] {
  if (k <= 0) return []
  const best: [number, number][] = []
  for (let i = 0; i < lp.length; i++) {
    const v = lp[i]!
    if (best.length < k || v > best[best.length - 1]![1]) {
      best.push([i, v])
      best.sort((a, b) => b[1] - a[1] || a[0] - b[0])
      if (best.length > k) best.pop()
    }
  }
  return best
}

export type SampleOptions = {
  /** 0 is greedy. @default 1 */
  readonly temperature?: number
  /** Nucleus: the most likely tokens whose probabilities reach this. @default 1 */
  readonly topP?: number
  /** Sample among the k most likely tokens only. @default none */
  readonly topK?: number
}

/** Restores the heap order of `heap[0…n)` below `at`: a parent comes before its children (higher log-probability
 * `l`, lower id on ties). */
function siftDown(heap: Int32Array, l: Float64Array, n: number, at: number): void {
  let i = at
  const h = heap[i]!,
    hv = l[h]!
  for (;;) {
    const c = 2 * i + 1
    if (c >= n) break
    let m = c,
      mi = heap[c]!,
      mv = l[mi]!
    if (c + 1 < n) {
      const ri = heap[c + 1]!,
        rv = l[ri]!
      if (rv > mv || (rv === mv && ri < mi)) {
        m = c + 1
        mi = ri
        mv = rv
      }
    }
    if (!(mv > hv || (mv === hv && mi < h))) break
    heap[i] = mi
    i = m
  }
  heap[i] = h
}

/** A pop over `ids` (reordered in place as a heap, built in O(n)): the most likely first, lower id first on ties;
 * -1 once empty. */
function bestFirst(l: Float64Array, ids: Int32Array): () => number {
  let n = ids.length
  for (let i = (n >> 1) - 1; i >= 0; i--) siftDown(ids, l, n, i)
  return () => {
    if (n === 0) return -1
    const top = ids[0]!
    ids[0] = ids[--n]!
    if (n > 0) siftDown(ids, l, n, 0)
    return top
  }
}

/** Ids this many nats or less below the most likely are the head of a draw over the whole distribution. */
const HEAD_NATS = 16

/** Ids of a bucket sorted by insertion (best first, lower id on ties) rather than split further. */
const SMALL_BUCKET = 16

/** Scratch for {@link walkBestFirst}'s bucket passes, reused (a draw per row and step): ids, bucket keys, counts. */
let scratch = new Int32Array(0),
  keys = new Int32Array(0),
  counts = new Int32Array(0)

/** A draw in progress: `u` what is left of it, `last` the last id walked. */
type Walk = { u: number; last: number }

/** Walks a[from, to), already best first: answers true where the draw is used up there. */
function walkRun(l: Float64Array, a: Int32Array, from: number, to: number, s: Walk): boolean {
  for (let j = from; j < to; j++) {
    const t = a[j]!
    s.last = t
    s.u -= Math.exp(l[t]!)
    if (s.u <= 0) return true
  }
  return false
}

/** Sorts a[from, to) (ascending ids) best first by insertion: an id moves only past worse ones, so equal ones keep
 * their ascending ids (a stable sort's order). */
function insertionSort(l: Float64Array, a: Int32Array, from: number, to: number): void {
  for (let i = from + 1; i < to; i++) {
    const t = a[i]!,
      v = l[t]!
    let j = i
    for (; j > from && l[a[j - 1]!]! < v; j--) a[j] = a[j - 1]!
    a[j] = t
  }
}

/**
 * Walks `a[from, to)` (a draw's candidates, ascending ids) best first, lower id first on ties, subtracting each one's
 * probability from `s.u` until it is used up (answers true, `s.last` the id that used it up); else answers false
 * with `s.last` the last id walked. Not a heap over all of them: a bucket pass (the ids spread by log-probability
 * over about one equal-width bucket per id, highest first, -Infinity in the last; a counting sort into `b`, so each
 * bucket keeps its ids ascending) and each bucket walked in turn, only as far as the draw goes: a few ids sorted by
 * insertion, more split the same way over their own range (a comparison sort past a few levels). A
 * log-probability's bucket is a monotone function of it, so the walk visits the ids in exactly a full sort's order
 * and subtracts the same numbers in the same order: the same token. At a flat distribution over 50,257 ids (a
 * randomly initialised model's) that is a fraction of the heap's time. `a` and `b` swap roles a level down.
 */
function walkBestFirst(l: Float64Array, a: Int32Array, b: Int32Array, from: number, to: number, s: Walk, depth = 0) {
  const n = to - from
  let hi = -Infinity,
    lo = Infinity,
    finiteLo = Infinity
  for (let i = from; i < to; i++) {
    const v = l[a[i]!]!
    if (v > hi) hi = v
    if (v < lo) lo = v
    if (v < finiteLo && v > -Infinity) finiteLo = v
  }
  if (!(hi > lo)) return walkRun(l, a, from, to, s) // all equal: ascending ids are the order
  if (n <= SMALL_BUCKET) {
    insertionSort(l, a, from, to)
    return walkRun(l, a, from, to, s)
  }
  if (depth >= 4 || !(hi > finiteLo && hi - finiteLo < Infinity)) {
    a.subarray(from, to).sort((x, y) => l[y]! - l[x]! || x - y)
    return walkRun(l, a, from, to, s)
  }
  const nb = n,
    inv = nb / (hi - finiteLo)
  if (keys.length < n) keys = new Int32Array(n)
  const start =
    depth === 0 ? (counts.length < nb + 1 ? (counts = new Int32Array(nb + 1)) : counts) : new Int32Array(nb + 1)
  start.fill(0, 0, nb + 1)
  for (let i = from; i < to; i++) {
    const k = Math.min(nb - 1, Math.floor((hi - l[a[i]!]!) * inv))
    keys[i - from] = k
    start[k + 1]!++
  }
  for (let k = 0; k < nb; k++) start[k + 1]! += start[k]!
  // placed from the end of each bucket backwards, ids taken in descending order: each bucket ascending again
  for (let i = to - 1; i >= from; i--) b[from + --start[keys[i - from]! + 1]!] = a[i]!
  // start[k + 1] is now bucket k's first: bucket k spans [start[k + 1], start[k + 2]) (the last ends at n)
  for (let k = 0; k < nb; k++) {
    const b0 = from + start[k + 1]!,
      b1 = k + 1 < nb ? from + start[k + 2]! : to
    const m = b1 - b0
    if (m === 0) continue
    // one id is its own order; more are ordered a level down
    if (m === 1 ? walkRun(l, b, b0, b1, s) : walkBestFirst(l, b, a, b0, b1, s, depth + 1)) return true
  }
  return false
}

/**
 * One draw over the whole distribution `l` (a log-softmax: its probabilities sum to 1, so the draw is a uniform
 * number in [0, 1)), walking the ids best first until the draw is used up. The head — the ids within
 * {@link HEAD_NATS} of the most likely, found in one pass without an exp — is sorted and walked first: all of it
 * comes before the rest in that order, and a trained model's draw ends inside it. Only when the draw gets past it
 * (or the head is a large part of the vocabulary: a flat distribution) are the rest walked, bucket by bucket
 * ({@link walkBestFirst}). So a peaked distribution over 50,257 ids costs one comparison per id and a few exps, not
 * a sort of all of them and an exp per id. A log-probability that is NaN has no place in that order: such a row
 * takes the heap ({@link bestFirst}), whatever order it gives.
 */
function drawWhole(l: Float64Array, rng: Pick<Rng, 'next'>): number {
  const V = l.length
  let max = -Infinity,
    nan = false
  for (let i = 0; i < V; i++) {
    const v = l[i]!
    if (v > max) max = v
    else if (Number.isNaN(v)) nan = true
  }
  const cut = max - HEAD_NATS,
    cap = Math.max(16, V >> 4)
  const head: number[] = []
  for (let i = 0; i < V && head.length <= cap; i++) if (l[i]! >= cut) head.push(i)
  const s = { u: rng.next(), last: 0 }
  let rest: Int32Array
  if (head.length <= cap) {
    head.sort((a, b) => l[b]! - l[a]! || a - b)
    for (const t of head) {
      s.last = t
      s.u -= Math.exp(l[t]!)
      if (s.u <= 0) return t
    }
    rest = new Int32Array(V - head.length)
    let j = 0
    for (let i = 0; i < V; i++) if (!(l[i]! >= cut)) rest[j++] = i
  } else {
    rest = new Int32Array(V)
    for (let i = 0; i < V; i++) rest[i] = i
  }
  if (!nan) {
    if (scratch.length < rest.length) scratch = new Int32Array(rest.length)
    walkBestFirst(l, rest, scratch, 0, rest.length, s)
    return s.last
  }
  const pop = bestFirst(l, rest)
  for (let t = pop(); t >= 0; t = pop()) {
    s.last = t
    s.u -= Math.exp(l[t]!)
    if (s.u <= 0) return t
  }
  return s.last
}

/**
 * Picks a token from one row of logits: the candidates in order of probability (lower id first on
 * ties), cut to `topK`, then to the nucleus `topP`, one uniform draw over what is left (the draw
 * scaled by the kept probabilities' sum) — without sorting the vocabulary: with a cut, a
 * binary heap (built in O(V)) yields candidates best first, and only as many are taken as the cut
 * needs; without one, the draw walks the head of the distribution first ({@link drawWhole}) and is
 * scaled by 1, not by the sum of all V probabilities (which is 1 within rounding: a sort-based
 * sampler that sums them picks the same token unless the draw falls within ~1e-15 of a boundary
 * between two). Typed arrays and loops throughout: at V = 512 a draw takes
 * microseconds, not the tenth of a millisecond that mapped copies and closures cost (which, per
 * generated token, was a sixth of a 16-stream server's time).
 * @param rng anything with `Rng`'s `next()`; one number is drawn unless greedy
 * @param lp the log-softmax of `logits` when the caller has it already (temperature 1 only: then it is the same)
 */
export function sampleToken(logits: Float32Array, o: SampleOptions, rng: Pick<Rng, 'next'>, lp?: Float64Array): number {
  const temp = o.temperature ?? 1,
    V = logits.length
  if (temp === 0) {
    let best = 0
    for (let i = 1; i < V; i++) if (logits[i]! > logits[best]!) best = i
    return best
  }
  if (!lp || temp !== 1) {
    const scaled = new Float32Array(V)
    for (let i = 0; i < V; i++) scaled[i] = logits[i]! / temp
    lp = logSoftmax(scaled)
  }
  const maxKeep = o.topK !== undefined ? Math.min(V, Math.max(1, o.topK)) : V
  const topP = o.topP ?? 1
  if (topP >= 1 && maxKeep === V) return drawWhole(lp, rng)
  const l = lp
  const all = new Int32Array(V)
  for (let i = 0; i < V; i++) all[i] = i
  const pop = bestFirst(l, all)
  const kept: number[] = [],
    probs: number[] = []
  let cum = 0
  while (kept.length < maxKeep && (topP >= 1 || cum < topP)) {
    const t = pop()
    kept.push(t)
    probs.push(Math.exp(l[t]!))
    cum += probs[probs.length - 1]!
  }
  let u = rng.next() * probs.reduce((a, b) => a + b, 0)
  for (let j = 0; j < kept.length; j++) {
    u -= probs[j]!
    if (u <= 0) return kept[j]!
  }
  return kept[kept.length - 1]!
}
