/**
 * @module Reading a token cache: every shard checked against the ledger (a disagreement
 * is refused, naming the shard), documents packed into one stream with EOS after each,
 * random access to fixed-length sequences, and a seeded shuffle of them.
 * Satisfies the training side's token-source shape (`numTokens`, `numBytes`, `read`).
 *
 * @example
 * const cache = await TokenCache.open('brown-gpt2')
 * const batch = cache.getBatch([0, 1, 2, 3], 128)               // Int32Array of 4 × 128 ids
 * const shuffled = cache.getBatch([0, 1], 128, { seed: 7 })     // same ids on every run
 */
import { cacheArtifact, withStore } from '../store.js'
import type { StoreAccess } from '../store.js'
import { resolveVersion } from '../dataset/open-dataset.js'
import { DatakitError } from '../errors.js'
import type { TokenCacheLedger } from './build-token-cache.js'
import { FeistelPermutation } from './feistel.js'

export type OpenTokenCacheOptions = StoreAccess & { readonly version?: number }

export type BatchOptions = {
  /** Shuffle sequences with this seed: index i reads sequence perm(i). Unshuffled when omitted. */
  readonly seed?: number
}

function mismatch(ref: string, shard: string, what: string): never {
  throw new DatakitError(
    'CACHE_LEDGER_MISMATCH',
    `token cache ${ref}: shard ${shard} disagrees with ledger.json (${what}); rebuild the cache`,
  )
}

export class TokenCache {
  /** Ids in the packed stream: every token plus one EOS per document. */
  readonly numTokens: number
  /** UTF-8 bytes of the text behind the ids. */
  readonly numBytes: number
  private readonly docStart: Float64Array
  private readonly docShard: Uint32Array
  private readonly docOffset: Float64Array
  private readonly perms = new Map<string, FeistelPermutation>()

  private constructor(
    readonly ref: string,
    readonly ledger: TokenCacheLedger,
    private readonly shards: readonly (Uint16Array | Uint32Array)[],
    offsets: readonly BigUint64Array[],
  ) {
    const docs = ledger.documents
    this.docStart = new Float64Array(docs + 1)
    this.docShard = new Uint32Array(docs)
    this.docOffset = new Float64Array(docs)
    let d = 0
    let pos = 0
    offsets.forEach((off, s) => {
      for (let i = 0; i + 1 < off.length; i++, d++) {
        this.docStart[d] = pos
        this.docShard[d] = s
        this.docOffset[d] = Number(off[i]!)
        pos += Number(off[i + 1]! - off[i]!) + 1
      }
    })
    this.docStart[docs] = pos
    this.numTokens = pos
    this.numBytes = ledger.bytes
  }

  /** Opens `token-caches/<name>` (latest unless `version`), verifying every shard against the ledger. */
  static async open(name: string, opts: OpenTokenCacheOptions = {}): Promise<TokenCache> {
    return withStore(opts, async (store) => {
      const artifact = cacheArtifact(name)
      const version = await resolveVersion(store, artifact, opts.version, 'token-caches')
      const view = await store.open(`${artifact}@${version}`)
      const ledger = JSON.parse(await view.readText('ledger.json')) as TokenCacheLedger
      const width = ledger.dtype === 'uint16' ? 2 : 4
      const shards: (Uint16Array | Uint32Array)[] = []
      const offsets: BigUint64Array[] = []
      for (const s of ledger.shards) {
        for (const ext of ['tokens', 'offsets'])
          if (!view.has(`${s.name}.${ext}`)) mismatch(view.ref, s.name, `file ${s.name}.${ext} is missing`)
        const tb = await view.read(`${s.name}.tokens`)
        const ob = await view.read(`${s.name}.offsets`)
        if (tb.byteLength !== s.tokens * width)
          mismatch(view.ref, s.name, `${tb.byteLength / width} tokens on disk, ledger says ${s.tokens}`)
        if (ob.byteLength !== (s.documents + 1) * 8)
          mismatch(view.ref, s.name, `${ob.byteLength / 8 - 1} documents on disk, ledger says ${s.documents}`)
        // Copy into aligned buffers (blob reads may share an unaligned buffer).
        const toks = width === 2 ? new Uint16Array(s.tokens) : new Uint32Array(s.tokens)
        new Uint8Array(toks.buffer).set(tb)
        const off = new BigUint64Array(s.documents + 1)
        new Uint8Array(off.buffer).set(ob)
        for (let i = 0; i < s.documents; i++)
          if (off[i]! > off[i + 1]!) mismatch(view.ref, s.name, `offsets decrease at document ${i}`)
        if (off[0] !== 0n || Number(off[s.documents]) !== s.tokens)
          mismatch(view.ref, s.name, `offsets span [${off[0]}, ${off[s.documents]}], expected [0, ${s.tokens}]`)
        shards.push(toks)
        offsets.push(off)
      }
      const docs = ledger.shards.reduce((a, s) => a + s.documents, 0)
      const toks = ledger.shards.reduce((a, s) => a + s.tokens, 0)
      if (docs !== ledger.documents || toks !== ledger.tokens)
        mismatch(
          view.ref,
          '(totals)',
          `shards hold ${docs} documents and ${toks} tokens, ledger totals ` +
            `say ${ledger.documents} and ${ledger.tokens}`,
        )
      return new TokenCache(view.ref, ledger, shards, offsets)
    })
  }

  /** Documents in the cache. */
  get numDocuments(): number {
    return this.ledger.documents
  }

  /** Sequences of `seqLen` ids the packed stream holds (the remainder is not used). */
  numSequences(seqLen: number): number {
    return Math.floor(this.numTokens / seqLen)
  }

  /** The token ids of document `d` (without EOS). */
  document(d: number): Uint16Array | Uint32Array {
    if (!Number.isInteger(d) || d < 0 || d >= this.ledger.documents)
      throw new DatakitError(
        'CACHE_INDEX_OUT_OF_RANGE',
        `document ${d} is outside [0, ${this.ledger.documents}) of ${this.ref}`,
      )
    const len = this.docStart[d + 1]! - this.docStart[d]! - 1
    return this.shards[this.docShard[d]!]!.subarray(this.docOffset[d]!, this.docOffset[d]! + len)
  }

  /** Ids [start, start + length) of the packed stream (documents, each followed by EOS). */
  read(start: number, length: number): Int32Array {
    if (
      !Number.isInteger(start) ||
      !Number.isInteger(length) ||
      start < 0 ||
      length < 0 ||
      start + length > this.numTokens
    ) {
      throw new DatakitError(
        'CACHE_INDEX_OUT_OF_RANGE',
        `read [${start}, ${start + length}) is outside the ${this.numTokens} ids of ${this.ref}`,
      )
    }
    const out = new Int32Array(length)
    this.fill(out, 0, start, length)
    return out
  }

  private fill(out: Int32Array, at: number, start: number, length: number): void {
    // Binary search for the document holding `start`.
    let lo = 0
    let hi = this.ledger.documents - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1
      if (this.docStart[mid]! <= start) lo = mid
      else hi = mid - 1
    }
    let d = lo
    let pos = start
    let w = at
    const end = at + length
    while (w < end) {
      const inDoc = pos - this.docStart[d]!
      const docLen = this.docStart[d + 1]! - this.docStart[d]! - 1
      if (inDoc < docLen) {
        const n = Math.min(docLen - inDoc, end - w)
        const src = this.shards[this.docShard[d]!]!
        const from = this.docOffset[d]! + inDoc
        for (let i = 0; i < n; i++) out[w + i] = src[from + i]!
        w += n
        pos += n
      } else {
        out[w++] = this.ledger.eos
        pos++
        d++
      }
    }
  }

  /**
   * Sequences `indices` of length `seqLen`, packed from the document stream, as one
   * row-major Int32Array of `indices.length × seqLen` ids. With `seed`, index i reads
   * sequence perm(i) of a seeded Feistel permutation of all sequences.
   */
  getBatch(indices: readonly number[], seqLen: number, opts: BatchOptions = {}): Int32Array {
    if (!Number.isInteger(seqLen) || seqLen < 1)
      throw new DatakitError('INVALID_ARGUMENT', `getBatch: seqLen must be a positive integer, got ${seqLen}`)
    const n = this.numSequences(seqLen)
    if (n === 0)
      throw new DatakitError(
        'CACHE_INDEX_OUT_OF_RANGE',
        `${this.ref} holds ${this.numTokens} ids, fewer than one sequence of ${seqLen}`,
      )
    let perm: FeistelPermutation | undefined
    if (opts.seed !== undefined) {
      const k = `${n}:${opts.seed}`
      perm = this.perms.get(k)
      if (!perm) this.perms.set(k, (perm = new FeistelPermutation(n, opts.seed)))
    }
    const out = new Int32Array(indices.length * seqLen)
    indices.forEach((i, row) => {
      if (!Number.isInteger(i) || i < 0 || i >= n)
        throw new DatakitError(
          'CACHE_INDEX_OUT_OF_RANGE',
          `sequence ${i} is outside [0, ${n}) of ${this.ref} at seqLen ${seqLen}`,
        )
      const s = perm ? perm.apply(i) : i
      this.fill(out, row * seqLen, s * seqLen, seqLen)
    })
    return out
  }
}
