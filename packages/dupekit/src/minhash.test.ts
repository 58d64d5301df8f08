import { describe, expect, test } from 'vitest'
import { estimateJaccard, MINHASH_DEFAULTS, MinHasher, minhashSignature } from './minhash.js'
import { normalizeText } from './normalize.js'
import { makeCorpus, rng } from '../bench/corpus.js'

/** Two token sets with exactly `common` shared tokens out of `union`, as texts of 1-word shingles. */
function pairWithJaccard(union: number, common: number, tag: string): [string, string] {
  const onlyA = Math.floor((union - common) / 2)
  const onlyB = union - common - onlyA
  const shared = Array.from({ length: common }, (_, i) => `s${tag}x${i}`)
  const a = [...shared, ...Array.from({ length: onlyA }, (_, i) => `a${tag}x${i}`)]
  const b = [...shared, ...Array.from({ length: onlyB }, (_, i) => `b${tag}x${i}`)]
  return [a.join(' '), b.join(' ')]
}

describe('MinHasher', () => {
  test('defaults are the fuzzy-dedup defaults', () => {
    const mh = new MinHasher()
    expect(mh.params).toEqual({ numPerm: 286, ngram: 5, shingle: 'char', seed: 42, normalize: {} })
    expect(MINHASH_DEFAULTS.numBands).toBe(26)
    expect(mh.signature('hello world')).toBeInstanceOf(Uint32Array)
    expect(mh.signature('hello world')).toHaveLength(286)
  })

  test('signatures are pinned: the same text and options give these values on every machine', () => {
    const text = 'The quick brown fox jumps over the lazy dog, again and again.'
    expect(Array.from(minhashSignature(text).subarray(0, 6))).toMatchInlineSnapshot(`
      [
        7896565,
        30751824,
        6179620,
        22161184,
        52701052,
        243452986,
      ]
    `)
    expect(
      Array.from(minhashSignature(text, { shingle: 'word', ngram: 2, seed: 7, numPerm: 8 })),
    ).toMatchInlineSnapshot(`
      [
        56879485,
        46594782,
        156413943,
        443360739,
        32095741,
        181859665,
        299889224,
        133405072,
      ]
    `)
  })

  test('same input, same signature; different seed, different signature', () => {
    const [doc] = makeCorpus(1, 11)
    const a = new MinHasher().signature(doc!)
    expect(new MinHasher().signature(doc!)).toEqual(a)
    expect(new MinHasher({ seed: 43 }).signature(doc!)).not.toEqual(a)
  })

  test('numPerm need not be a multiple of the SIMD width', () => {
    for (const numPerm of [1, 3, 5, 17, 63, 286]) {
      const full = new MinHasher({ numPerm: 288 }).signature('some text here to hash')
      const sig = new MinHasher({ numPerm }).signature('some text here to hash')
      expect(sig).toHaveLength(numPerm)
      expect(Array.from(sig)).toEqual(Array.from(full.subarray(0, numPerm)))
    }
  })

  test('normalization: case, width and whitespace do not change the signature unless disabled', () => {
    const mh = new MinHasher()
    expect(mh.signature('Hello   WORLD\n foo')).toEqual(mh.signature('hello world foo'))
    const raw = new MinHasher({ normalize: false })
    expect(raw.signature('Hello WORLD foo')).not.toEqual(raw.signature('hello world foo'))
    const strip = new MinHasher({ normalize: { stripPunctuation: true } })
    expect(strip.signature('hello, world! foo')).toEqual(strip.signature('hello world foo'))
  })

  test('char shingles are code points: astral characters count once', () => {
    const mh = new MinHasher({ ngram: 2, normalize: false })
    // "a🙂b" has code-point bigrams {a🙂, 🙂b}; "a🙂" and "🙂b" as documents are each one of them.
    const whole = mh.signature('a🙂b')
    const left = mh.signature('a🙂')
    const right = mh.signature('🙂b')
    expect(estimateJaccard(left, right)).toBe(0)
    expect(estimateJaccard(whole, left)).toBeGreaterThan(0.3)
    expect(estimateJaccard(whole, right)).toBeGreaterThan(0.3)
  })

  test('short and empty documents', () => {
    const mh = new MinHasher()
    expect(Array.from(mh.signature('')).every((v) => v === 0xffffffff)).toBe(true)
    expect(Array.from(mh.signature('   ')).every((v) => v === 0xffffffff)).toBe(true)
    // Shorter than one n-gram: the whole text is one shingle.
    expect(mh.signature('abc')).toEqual(mh.signature('ABC'))
    expect(mh.signature('abc')).not.toEqual(mh.signature('abd'))
    const w = new MinHasher({ shingle: 'word' })
    expect(w.signature('two words')).not.toEqual(w.signature('two word'))
  })

  test('word shingles ignore how much whitespace separates words', () => {
    const w = new MinHasher({ shingle: 'word', ngram: 2, normalize: false })
    expect(w.signature('a b\tc\n\nd')).toEqual(w.signature('a  b c d'))
  })

  test('signatures() equals signature() per document, across memory growth', () => {
    const mh = new MinHasher({ shingle: 'word' })
    const docs = [...makeCorpus(20, 5), 'x'.repeat(300_000), '']
    const flat = mh.signatures(docs)
    docs.forEach((d, i) => expect(flat.subarray(i * 286, (i + 1) * 286)).toEqual(mh.signature(d)))
  })

  test('bad options fail with the field and the default', () => {
    expect(() => new MinHasher({ numPerm: 0 })).toThrow(
      /numPerm must be an integer in \[1, 65536\], got 0; the default is 286/,
    )
    expect(() => new MinHasher({ ngram: 1.5 })).toThrow(/ngram must be an integer/)
    expect(() => new MinHasher({ seed: -1 })).toThrow(/seed must be an integer in \[0, 2\^32\)/)
    expect(() => new MinHasher({ shingle: 'line' as 'char' })).toThrow(/shingle must be 'char' or 'word'/)
    expect(() => estimateJaccard(new Uint32Array(3), new Uint32Array(4))).toThrow(/same non-zero length/)
  })
})

describe('MinHash Jaccard estimates (statistical)', () => {
  // Each slot agrees with probability J, independently across slots, so an estimate
  // from k slots has standard deviation sigma = sqrt(J(1-J)/k). With fixed inputs the
  // test is deterministic; the tolerances come from sigma, not from tuning.
  const k = MINHASH_DEFAULTS.numPerm
  const union = 200
  const pairsPerJ = 40
  const mh = new MinHasher({ shingle: 'word', ngram: 1, normalize: false })
  const js = [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]

  const rows = js.map((target) => {
    const common = Math.round(target * union)
    const J = common / union
    const ests: number[] = []
    for (let p = 0; p < pairsPerJ; p++) {
      const [a, b] = pairWithJaccard(union, common, `${target}-${p}`)
      ests.push(estimateJaccard(mh.signature(a), mh.signature(b)))
    }
    return { J, ests, sigma: Math.sqrt((J * (1 - J)) / k) }
  })

  test.each(rows.map((r) => [r.J, r] as const))(
    'J = %f: every estimate within 5 sigma, the mean within 4 sigma/sqrt(n)',
    (_, r) => {
      for (const e of r.ests) expect(Math.abs(e - r.J)).toBeLessThanOrEqual(5 * r.sigma)
      const mean = r.ests.reduce((s, e) => s + e, 0) / r.ests.length
      expect(Math.abs(mean - r.J)).toBeLessThanOrEqual((4 * r.sigma) / Math.sqrt(r.ests.length))
    },
  )

  test('the spread matches sqrt(J(1-J)/k): slots behave as independent permutations', () => {
    // sum((e-J)^2 / sigma^2) over N estimates is ~ chi-square(N): mean 1 per estimate,
    // standard deviation sqrt(2/N); correlated permutations would inflate it.
    let z2 = 0
    let n = 0
    for (const r of rows) for (const e of r.ests) (z2 += (e - r.J) ** 2 / r.sigma ** 2), n++
    const ratio = z2 / n
    expect(Math.abs(ratio - 1)).toBeLessThanOrEqual(4 * Math.sqrt(2 / n))
  })

  test('J = 0 and J = 1 are exact', () => {
    const [a, b] = pairWithJaccard(union, 0, 'zero')
    expect(estimateJaccard(mh.signature(a), mh.signature(b))).toBe(0)
    const [c] = pairWithJaccard(union, union, 'one')
    const shuffled = c
      .split(' ')
      .sort(() => (rng(3)() < 0.5 ? -1 : 1))
      .join(' ')
    expect(estimateJaccard(mh.signature(c), mh.signature(shuffled))).toBe(1)
  })
})

describe('kernel-side normalization', () => {
  // The kernels fold ASCII case and collapse whitespace while decoding; the result
  // must be exactly the shingles of normalizeText's output.
  const alphabet = [
    'a',
    'B',
    'c',
    'Ä',
    'é',
    'ﬁ',
    'Ｑ',
    '🙂',
    ' ',
    '  ',
    '\t',
    '\n',
    '\u00a0',
    '\u2003',
    '\u2028',
    '\ufeff',
    '\u1680',
    ',',
    '!',
    '-',
    'İ',
    'ß',
    'Σ',
  ]
  let s = 99
  const next = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0), s >>> 8)
  const samples = Array.from({ length: 400 }, () => {
    let str = ''
    const len = next() % 40
    for (let i = 0; i < len; i++) str += alphabet[next() % alphabet.length]
    return str
  })

  test.each([
    ['char', 1],
    ['char', 3],
    ['word', 1],
    ['word', 2],
  ] as const)(
    '%s %i-grams: signature(text) = signature(normalizeText(text)) without normalization',
    (shingle, ngram) => {
      for (const stripPunctuation of [false, true]) {
        const fast = new MinHasher({ shingle, ngram, numPerm: 16, normalize: { stripPunctuation } })
        const plain = new MinHasher({ shingle, ngram, numPerm: 16, normalize: false })
        for (const text of samples) {
          expect(Array.from(fast.signature(text)), JSON.stringify(text)).toEqual(
            Array.from(plain.signature(normalizeText(text, { stripPunctuation }))),
          )
        }
      }
    },
  )
})

test('signatures stay right when hashing and Bloom calls share the kernel memory in between', async () => {
  const { xxh3, xxh128Batch } = await import('./hash.js')
  const { BloomFilter } = await import('./bloom.js')
  const docs = makeCorpus(6, 8)
  const want = docs.map((d) => new MinHasher({ shingle: 'word' }).signature(d))
  const mh = new MinHasher({ shingle: 'word' })
  const other = new MinHasher({ seed: 1 })
  const bf = BloomFilter.create({ expectedItems: 10 })
  docs.forEach((d, i) => {
    expect(mh.signature(d)).toEqual(want[i])
    xxh3(d.repeat(3))
    expect(mh.signature(d)).toEqual(want[i])
    xxh128Batch([d, d])
    expect(mh.signature(d)).toEqual(want[i])
    bf.add(d.repeat(2))
    other.signature(d)
    expect(mh.signature(d)).toEqual(want[i])
  })
})
