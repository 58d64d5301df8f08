/**
 * @module Union-find (disjoint sets) over integer ids, for clustering candidate pairs.
 *
 * The root of every set is its smallest id (a union always hangs the larger root
 * under the smaller), so `find(x)` is directly the cluster's canonical member.
 * Path halving keeps finds near-constant; storage is one Uint32Array.
 *
 * @example
 * const uf = new UnionFind()
 * uf.union(5, 2); uf.union(2, 9)
 * uf.find(9) // 2
 */
import { DupekitError } from './errors.js'

const MAX_ID = 0xfffffffe

export class UnionFind {
  private parent: Uint32Array
  /** One more than the largest id seen. */
  private n = 0

  constructor(capacity = 1024) {
    this.parent = new Uint32Array(Math.max(16, capacity))
    for (let i = 0; i < this.parent.length; i++) this.parent[i] = i
  }

  /** Ids seen so far are 0 .. size-1 (unseen ids in between are singletons). */
  get size(): number {
    return this.n
  }

  private touch(x: number): void {
    if (!Number.isInteger(x) || x < 0 || x > MAX_ID) {
      throw new DupekitError('INVALID_ARGUMENT', `UnionFind: id must be an integer in [0, ${MAX_ID}], got ${x}`)
    }
    if (x >= this.parent.length) {
      let cap = this.parent.length
      while (cap <= x) cap *= 2
      const next = new Uint32Array(Math.min(cap, MAX_ID + 1))
      next.set(this.parent)
      for (let i = this.parent.length; i < next.length; i++) next[i] = i
      this.parent = next
    }
    if (x >= this.n) this.n = x + 1
  }

  /** The canonical (smallest) id of the set holding `x`. */
  find(x: number): number {
    this.touch(x)
    const p = this.parent
    while (p[x] !== x) {
      const gp = p[p[x]!]!
      p[x] = gp
      x = gp
    }
    return x
  }

  /** Merges the sets of `a` and `b`; returns the canonical id of the merged set. */
  union(a: number, b: number): number {
    const ra = this.find(a)
    const rb = this.find(b)
    if (ra === rb) return ra
    if (ra < rb) {
      this.parent[rb] = ra
      return ra
    }
    this.parent[ra] = rb
    return rb
  }

  /** Unions every pair of a flat `[a0, b0, a1, b1, …]` list, e.g. LSH candidate pairs. */
  unionPairs(pairs: ArrayLike<number>): void {
    for (let i = 0; i + 1 < pairs.length; i += 2) this.union(pairs[i]!, pairs[i + 1]!)
  }

  connected(a: number, b: number): boolean {
    return this.find(a) === this.find(b)
  }

  /** `out[i]` = canonical id of `i`, for ids `0 .. count-1`. @default count this.size */
  canonicalIds(count = this.n): Uint32Array {
    const out = new Uint32Array(count)
    for (let i = 0; i < count; i++) out[i] = this.find(i)
    return out
  }

  /**
   * Sets with at least `minSize` members, each sorted ascending (so `[0]` is canonical),
   * ordered by canonical id. @default minSize 2
   */
  clusters(minSize = 2): number[][] {
    // Count first, so that singletons (most documents) cost no allocation.
    const roots = this.canonicalIds()
    const count = new Uint32Array(this.n)
    for (let i = 0; i < this.n; i++) count[roots[i]!]!++
    const byRoot = new Map<number, number[]>()
    for (let i = 0; i < this.n; i++) {
      const r = roots[i]!
      if (count[r]! < minSize) continue
      let members = byRoot.get(r)
      if (members === undefined) byRoot.set(r, (members = []))
      members.push(i)
    }
    // Roots are smallest members and first seen in id order: already sorted by canonical id.
    return [...byRoot.values()]
  }
}
