/**
 * The classifier on real labelled text (Cooking Stack Exchange titles, test-fixtures/cooking-
 * stackexchange): fastText's hashing and tokenization against independent BigInt/byte
 * references, the accuracy training reaches on a two-label task, and the model file: a round trip
 * predicts identically, a damaged or cut file is an error naming it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { DatakitError } from '../errors.js'
import { decodeClassifier, encodeClassifier, loadClassifier, saveClassifier } from './model-file.js'
import { addWordNgrams, EOS, fastTextHash, forEachToken } from './tokens.js'
import { trainClassifier } from './train.js'

const root = mkdtempSync(join(tmpdir(), 'datakit-quality-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const fixture = join(import.meta.dirname, '../../test-fixtures/cooking-stackexchange/cooking.stackexchange.txt')
const lines = readFileSync(fixture, 'utf8')
  .split('\n')
  .filter((l) => l !== '')

/** Titles tagged baking or food-safety (not both), as a two-label task: the last 500 are the test set. */
const A = '__label__baking'
const B = '__label__food-safety'
const binary = lines
  .filter((l) => l.split(' ').includes(A) !== l.split(' ').includes(B))
  .map((l) => ({
    labels: [l.split(' ').includes(A) ? A : B],
    text: l
      .split(' ')
      .filter((t) => !t.startsWith('__label__'))
      .join(' '),
  }))
const train = binary.slice(0, -500)
const held = binary.slice(-500)

/** fastText's hash the slow way: FNV-1a over UTF-8 bytes, each sign-extended from int8. */
function refHash(s: string): number {
  let h = 0x811c9dc5n
  for (const b of Buffer.from(s, 'utf8'))
    h = ((h ^ BigInt.asUintN(32, BigInt((b << 24) >> 24))) * 0x01000193n) & 0xffffffffn
  return Number(h)
}

describe('fastText tokens', () => {
  test('hashes are FNV-1a over sign-extended UTF-8 bytes', () => {
    expect(fastTextHash('hello')).toBe(0x4f9f2cab)
    for (const w of ['crème', 'brûlée', '寿司', '🍣', 'naïve-café', EOS]) expect(fastTextHash(w)).toBe(refHash(w))
  })

  test('tokens split on fastText’s seven spaces, and every line ends with </s>', () => {
    const seen: string[] = []
    forEachToken(' a\tb\r\nc\v\fd\0e  ', (t, h) => {
      seen.push(t)
      expect(h).toBe(refHash(t))
    })
    expect(seen).toEqual(['a', 'b', 'c', 'd', 'e', EOS])
  })

  test('word n-gram rows follow fastText’s 64-bit arithmetic modulo bucket', () => {
    const words = ['how', 'to', 'brûlée', 'a', 'crème', EOS]
    const hashes = Int32Array.from(words.map((w) => fastTextHash(w) | 0))
    const bucket = 2_000_000
    const out = new Int32Array(64)
    const n = addWordNgrams(hashes, hashes.length, 3, bucket, 7, out, 0)
    const want: number[] = []
    for (let i = 0; i < hashes.length; i++) {
      let h = BigInt.asUintN(64, BigInt(hashes[i]!))
      for (let j = i + 1; j < hashes.length && j < i + 3; j++) {
        h = BigInt.asUintN(64, h * 116049371n + BigInt.asUintN(64, BigInt(hashes[j]!)))
        want.push(7 + Number(h % BigInt(bucket)))
      }
    }
    expect([...out.subarray(0, n)]).toEqual(want)
  })
})

describe('training', () => {
  test('two labels of real titles: held-out accuracy above 85 %', () => {
    const { classifier, stats } = trainClassifier(train, { dim: 20, epoch: 10, lr: 0.5, wordNgrams: 2, bucket: 20_000 })
    expect(stats).toMatchObject({ examples: train.length, labels: 2, skipped: 0 })
    const right = held.filter((e) => classifier.top(e.text) === e.labels[0]).length
    expect(right / held.length).toBeGreaterThan(0.85)
    const p = classifier.probability(held[0]!.text, 'baking')!
    expect(p + classifier.probability(held[0]!.text, 'food-safety')!).toBeCloseTo(1, 6)
    expect(
      classifier
        .predict(held[0]!.text, 2)
        .map((x) => x.label)
        .sort(),
    ).toEqual([A, B])
  })

  test('examples without a label, or with no word, are counted as skipped', () => {
    const { stats } = trainClassifier(['__label__x some words', 'no label here', '__label__y', '__label__x more'], {
      dim: 4,
    })
    // the second has no label; the third has a label and only </s> as its word, which fastText trains on
    expect(stats).toMatchObject({ examples: 4, skipped: 1, labels: 2 })
  })

  test('bad hyper-parameters and unlabelled data are refused, naming what is wrong', () => {
    expect(() => trainClassifier(train, { dim: 0 })).toThrow(/dim must be an integer in \[1, 4096\], got 0/)
    expect(() => trainClassifier(['no labels at all'])).toThrow(/none of the 1 examples has a label/)
  })
})

describe('model file', () => {
  const { classifier, touched } = trainClassifier(train.slice(0, 600), { dim: 8, wordNgrams: 2, bucket: 50_000 })
  const path = join(root, 'model.mqc')

  test('a round trip predicts identically, storing only the rows training changed', async () => {
    await saveClassifier(path, classifier, touched)
    const back = await loadClassifier(path)
    expect(back.labels).toEqual(classifier.labels)
    expect(back.words).toEqual(classifier.words)
    expect(back.input).toEqual(classifier.input)
    expect(back.output).toEqual(classifier.output)
    // unseen n-grams land on rows never stored: they are drawn again from the seed, identically
    for (const e of [...held.slice(0, 50), { text: 'zebra quux flimflam never seen' }])
      expect(back.probability(e.text, 'baking')).toBe(classifier.probability(e.text, 'baking'))
    const full = encodeClassifier(classifier)
    expect(readFileSync(path).length).toBeLessThan(full.length / 2)
  })

  test('a cut, damaged or foreign file is an error naming it', async () => {
    const bytes = readFileSync(path)
    const cut = join(root, 'cut.mqc')
    writeFileSync(cut, bytes.subarray(0, bytes.length - 100))
    const err = await loadClassifier(cut).catch((e) => e)
    expect(err).toBeInstanceOf(DatakitError)
    expect((err as Error).message).toMatch(
      new RegExp(`classifier model ${cut}: it is \\d+ bytes where its header says`),
    )
    const flipped = Buffer.from(bytes)
    flipped[flipped.length - 40]! ^= 1
    expect(() => decodeClassifier(flipped, 'flipped.mqc')).toThrow(/flipped.mqc: checksum mismatch/)
    expect(() => decodeClassifier(Buffer.from('__label__x hello\n'), 'x.txt')).toThrow(/x.txt: no "marin-qc" header/)
    // a header claiming a huge matrix is refused before anything is allocated
    const huge = Buffer.from(bytes)
    const head = JSON.parse(huge.toString('utf8', 16, 16 + huge.readUInt32LE(12)))
    const big = Buffer.from(JSON.stringify({ ...head, args: { ...head.args, dim: 4096, bucket: 2 ** 26 } }))
    const forged = Buffer.concat([
      huge.subarray(0, 12),
      Buffer.alloc(4),
      big,
      huge.subarray(16 + huge.readUInt32LE(12)),
    ])
    forged.writeUInt32LE(big.length, 12)
    expect(() => decodeClassifier(forged, 'forged.mqc')).toThrow(/forged.mqc: .* input vectors exceed/)
    await expect(loadClassifier(join(root, 'absent.mqc'))).rejects.toThrow(/absent.mqc: cannot be read/)
  })
})
