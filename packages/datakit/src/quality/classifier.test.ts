/**
 * The classifier on real labelled text (Cooking Stack Exchange titles, test-fixtures/cooking-
 * stackexchange): fastText's hashing and tokenization against independent BigInt/byte
 * references, the accuracy training reaches on a two-label task, and the model file: a round trip
 * predicts identically, a damaged or cut file is an error naming it.
 */
import { createHash } from 'node:crypto'
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

/** `bytes` with its trailing SHA-256 made right again, as a forger would. */
function resum(bytes: Buffer): Buffer {
  const body = bytes.subarray(0, bytes.length - 32)
  return Buffer.concat([body, createHash('sha256').update(body).digest()])
}

/** The header JSON of a model file, and where its stored row indices start. */
function layout(bytes: Buffer): { head: Record<string, unknown>; rowsAt: number } {
  const headLen = bytes.readUInt32LE(12)
  const head = JSON.parse(bytes.toString('utf8', 16, 16 + headLen))
  const end = 16 + headLen + (head.vocabBytes as number)
  return { head, rowsAt: end + ((4 - (end % 4)) % 4) }
}

describe('model file', () => {
  const { classifier } = trainClassifier(train.slice(0, 600), { dim: 8, wordNgrams: 2, bucket: 50_000 })
  const path = join(root, 'model.mqc')

  test('a round trip predicts identically, storing only the rows training changed', async () => {
    await saveClassifier(path, classifier)
    const back = await loadClassifier(path)
    expect(back.labels).toEqual(classifier.labels)
    expect(back.words).toEqual(classifier.words)
    expect(back.input.ids).toEqual(classifier.input.ids)
    expect(back.input.values).toEqual(classifier.input.values)
    expect(back.output).toEqual(classifier.output)
    // unseen n-grams land on rows never stored: they are drawn again from the seed, identically
    for (const e of [...held.slice(0, 50), { text: 'zebra quux flimflam never seen' }])
      expect(back.probability(e.text, 'baking')).toBe(classifier.probability(e.text, 'baking'))
    expect(encodeClassifier(back).equals(readFileSync(path))).toBe(true)
    const all = (classifier.nwords + 50_000) * 8 * 4
    expect(readFileSync(path).length).toBeLessThan(all / 2)
    // decodeClassifier copies: the bytes it read may change afterwards
    const bytes = readFileSync(path)
    const copy = decodeClassifier(bytes, 'copy.mqc')
    bytes.fill(0)
    expect(copy.probability(held[0]!.text, 'baking')).toBe(classifier.probability(held[0]!.text, 'baking'))
  })

  test('2M buckets: the file holds only trained rows; a row never stored reads its initial value', async () => {
    const big = trainClassifier(train.slice(0, 300), { dim: 8, wordNgrams: 2 }).classifier
    expect(big.args.bucket).toBe(2_000_000)
    const p = join(root, 'big.mqc')
    await saveClassifier(p, big)
    expect(readFileSync(p).length).toBeLessThan(2_000_000 * 8 * 4 * 0.01)
    const back = await loadClassifier(p)
    expect(back.input.count).toBe(big.nwords + 2_000_000)
    expect(back.input.ids.length).toBe(big.input.ids.length)
    let unstored = -1
    for (let r = big.nwords; r < back.input.count && unstored < 0; r++) if (!back.input.stored(r)) unstored = r
    // the same row trained without it being stored: its values are those training started from
    const fresh = new Float32Array(back.input.row(unstored))
    expect(fresh.every((v) => Math.abs(v) <= 1 / 8)).toBe(true)
    expect(back.input.row(unstored)).toEqual(fresh)
    for (const e of held.slice(0, 30))
      expect(back.probability(e.text, 'baking')).toBe(big.probability(e.text, 'baking'))
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
    const future = Buffer.from(bytes)
    future.writeUInt32LE(2, 8)
    expect(() => decodeClassifier(future, 'future.mqc')).toThrow(/future.mqc: format version 2, this code reads 1/)
    await expect(loadClassifier(join(root, 'absent.mqc'))).rejects.toThrow(/absent.mqc: cannot be read/)
  })

  test('a forged file with a valid checksum is refused before its sizes are allocated or its rows placed', () => {
    const bytes = readFileSync(path)
    const { head, rowsAt } = layout(bytes)
    const withHead = (h: Record<string, unknown>) => {
      const j = Buffer.from(JSON.stringify(h))
      const f = Buffer.concat([bytes.subarray(0, 12), Buffer.alloc(4), j, bytes.subarray(16 + bytes.readUInt32LE(12))])
      f.writeUInt32LE(j.length, 12)
      return resum(f)
    }
    // a header claiming a huge matrix
    const args = { ...(head.args as object), dim: 4096, bucket: 2 ** 26 }
    expect(() => decodeClassifier(withHead({ ...head, args, storedRows: 2 ** 26 }), 'forged.mqc')).toThrow(
      /forged.mqc: .* stored input vectors exceed/,
    )
    expect(() => decodeClassifier(withHead({ ...head, nwords: 2 ** 31 }), 'words.mqc')).toThrow(/words.mqc: nwords is/)
    // stored rows out of order, or past the matrix
    const swapped = Buffer.from(bytes)
    const r0 = swapped.readUInt32LE(rowsAt)
    swapped.writeUInt32LE(swapped.readUInt32LE(rowsAt + 4), rowsAt)
    swapped.writeUInt32LE(r0, rowsAt + 4)
    expect(() => decodeClassifier(resum(swapped), 'swapped.mqc')).toThrow(
      /swapped.mqc: stored row \d+ follows row \d+ \(rows must ascend\)/,
    )
    const past = Buffer.from(bytes)
    past.writeUInt32LE(0xffffffff, rowsAt + 4 * ((head.storedRows as number) - 1))
    expect(() => decodeClassifier(resum(past), 'past.mqc')).toThrow(/past.mqc: stored row 4294967295 is past the/)
  })
})
