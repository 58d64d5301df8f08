/**
 * @module Deterministic English-like documents for benchmarks and statistical tests:
 * words drawn from a fixed list with a Zipf-like skew by a seeded generator, with
 * sentence capitals and punctuation, so that normalization and shingling see
 * realistic text. No downloads; the same seed gives the same documents everywhere.
 */

const WORDS = (
  'the of and to in a is that for it as was with be by on not he this are or his from at which but have an they ' +
  'you were her she there been one all we their has would when if so no will more what up out into its time can ' +
  'only other new some could these two may first then do any like my now over such our man me even most made after ' +
  'also did many before must through back years where much your way well down should because each just those people ' +
  'how too little state good very make world still own see men ' +
  'work long get here between both life being under never ' +
  'day same another know while last might us great old year off come since against go came right used take three ' +
  'water system history during government number research language model training data science river mountain city ' +
  'village market season energy network program computer island music theory family children century village church ' +
  'army battle empire trade school student teacher company product service region species forest ocean weather ' +
  'population economy culture museum library bridge railway station airport hospital election council province'
).split(' ')

/** xorshift32: tiny, fast, and identical on every platform. */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 0x9e3779b9
  return () => {
    s ^= s << 13
    s >>>= 0
    s ^= s >>> 17
    s ^= s << 5
    s >>>= 0
    return s / 4294967296
  }
}

/** Picks a word with a Zipf-like skew: common words much more often. */
function word(r: () => number): string {
  const u = r()
  return WORDS[Math.floor(u * u * WORDS.length)]!
}

/** One document of about `bytes` characters of English-like prose. */
export function makeDocument(r: () => number, bytes = 1024): string {
  const parts: string[] = []
  let len = 0
  let sentence = 0
  while (len < bytes) {
    let w = word(r)
    if (sentence === 0) w = w[0]!.toUpperCase() + w.slice(1)
    sentence++
    if (sentence > 6 && r() < 0.15) {
      w += r() < 0.8 ? '.' : r() < 0.5 ? '?' : '!'
      sentence = 0
    } else if (r() < 0.06) {
      w += ','
    }
    parts.push(w)
    len += w.length + 1
  }
  return parts.join(' ').slice(0, bytes)
}

/** `count` documents of about `bytes` characters each, from `seed`. */
export function makeCorpus(count: number, seed = 1, bytes = 1024): string[] {
  const r = rng(seed)
  return Array.from({ length: count }, () => makeDocument(r, bytes))
}

/** The word list the generator draws from (for tests that build their own texts). */
export const CORPUS_WORDS: readonly string[] = WORDS
