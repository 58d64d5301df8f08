import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { encode as gptEncode } from 'gpt-tokenizer/encoding/r50k_base'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { brownParagraphs, gpt2Files } from '../test-support/brown.js'
import { BpeTokenizer } from './bpe-tokenizer.js'
import { BYTE_TO_CHAR } from './byte-level.js'
import { trainBpe } from './train-bpe.js'

const dir = mkdtempSync(join(tmpdir(), 'bpe-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A deterministic generator of strings over all of Unicode, surrogate pairs included. */
function randomUnicode(seed: number, n: number): string[] {
  let s = seed >>> 0
  const rand = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32
  const out: string[] = []
  for (let i = 0; i < n; i++) {
    let str = ''
    const len = Math.floor(rand() * 40)
    for (let j = 0; j < len; j++) {
      const r = rand()
      let cp: number
      if (r < 0.4) cp = 0x20 + Math.floor(rand() * 0x5f)
      else if (r < 0.5) cp = Math.floor(rand() * 0x20)
      else if (r < 0.8) cp = 0x80 + Math.floor(rand() * 0xff80)
      else cp = 0x10000 + Math.floor(rand() * 0xfffff)
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd
      str += String.fromCodePoint(cp)
    }
    out.push(str)
  }
  return out
}

describe('trained byte-level BPE', () => {
  let tok: BpeTokenizer
  const corpus = brownParagraphs(20)
  beforeAll(() => {
    tok = trainBpe(corpus, { vocabSize: 1200, specialTokens: ['<|endoftext|>'] })
  })

  test('fills the vocabulary: bytes, learned merges, then specials', () => {
    expect(tok.vocabSize).toBe(1200)
    expect(tok.tokenToId('<|endoftext|>')).toBe(1199)
    expect(tok.idToToken(32)).toBe('Ġ')
    expect(tok.tokenToId('Ġthe')).toBeGreaterThan(255)
  })

  test('round-trips random Unicode, including bytes never seen in training', () => {
    for (const s of randomUnicode(7, 2000)) expect(tok.decode(tok.encode(s))).toBe(s)
  })

  test('compresses the text it was trained on', () => {
    const text = corpus.slice(0, 50).join('\n')
    const ids = tok.encode(text)
    expect(tok.decode(ids)).toBe(text)
    expect(Buffer.byteLength(text) / ids.length).toBeGreaterThan(2.5)
  })

  test('special tokens are text unless matching is asked for', () => {
    const s = 'a<|endoftext|>b'
    expect(tok.encode(s)).not.toContain(1199)
    expect(tok.encode(s, { specials: 'match' })).toContain(1199)
    expect(tok.decode(tok.encode(s, { specials: 'match' }))).toBe(s)
  })

  test('save and load through tokenizer.json gives the same ids', async () => {
    const path = join(dir, 'tokenizer.json')
    writeFileSync(path, JSON.stringify(tok.toJSON()))
    const loaded = await BpeTokenizer.load(path)
    const text = corpus.slice(100, 140).join('\n')
    expect(loaded.encode(text)).toEqual(tok.encode(text))
    expect(loaded.toJSON()).toEqual(tok.toJSON())
  })

  test('training is deterministic', () => {
    const again = trainBpe(corpus, { vocabSize: 1200, specialTokens: ['<|endoftext|>'] })
    expect(again.toJSON()).toEqual(tok.toJSON())
  })

  test('an async iterable streams the corpus in and trains the same tokenizer', async () => {
    async function* stream(): AsyncGenerator<string> {
      for (const text of corpus) yield text
    }
    const streamed = await trainBpe(stream(), { vocabSize: 1200, specialTokens: ['<|endoftext|>'] })
    expect(streamed.toJSON()).toEqual(tok.toJSON())
    async function* bad(): AsyncGenerator<string> {
      yield 'fine'
      yield 3 as unknown as string
    }
    await expect(trainBpe(bad(), { vocabSize: 300 })).rejects.toThrow(/text 1 is number, not a string/)
  })
})

/** The textbook trainer: recount every pair before every merge. Slow, obviously right. */
function naiveMerges(texts: string[], merges: number, tok: BpeTokenizer): string[] {
  const counts = new Map<string, number>()
  for (const t of texts)
    for (const p of t.match(new RegExp(tok.pattern, 'gu')) ?? []) counts.set(p, (counts.get(p) ?? 0) + 1)
  const words = [...counts].map(([p, c]) => ({ syms: [...Buffer.from(p)].map((b) => tok.idToToken(b)!), c }))
  const out: string[] = []
  const idOf = new Map<string, number>()
  for (let b = 0; b < 256; b++) idOf.set(tok.idToToken(b)!, b)
  for (let m = 0; m < merges; m++) {
    const pairs = new Map<string, number>()
    for (const w of words)
      for (let i = 0; i < w.syms.length - 1; i++)
        pairs.set(w.syms[i] + '\u0000' + w.syms[i + 1], (pairs.get(w.syms[i] + '\u0000' + w.syms[i + 1]) ?? 0) + w.c)
    let best = ''
    let bestCount = 0
    let bestKey = Infinity
    for (const [p, c] of pairs) {
      const [l, r] = p.split('\u0000') as [string, string]
      const key = idOf.get(l)! * 2 ** 21 + idOf.get(r)!
      if (c > bestCount || (c === bestCount && key < bestKey)) [best, bestCount, bestKey] = [p, c, key]
    }
    if (bestCount < 2) break
    const [l, r] = best.split('\u0000') as [string, string]
    if (!idOf.has(l + r)) idOf.set(l + r, idOf.size)
    out.push(`${l} ${r}`)
    for (const w of words) {
      const next: string[] = []
      for (let i = 0; i < w.syms.length; i++) {
        if (i < w.syms.length - 1 && w.syms[i] === l && w.syms[i + 1] === r) {
          next.push(l + r)
          i++
        } else next.push(w.syms[i]!)
      }
      w.syms = next
    }
  }
  return out
}

test('incremental training learns the same merges as recounting every pair', () => {
  const texts = brownParagraphs(3)
  const tok = trainBpe(texts, { vocabSize: 256 + 150 })
  expect(tok.mergeList.map(([l, r]) => `${l} ${r}`)).toEqual(naiveMerges(texts, 150, tok))
})

describe('GPT-2 vocabulary', () => {
  const { encoderJson, vocabBpe } = gpt2Files()
  const gpt2 = BpeTokenizer.fromGpt2Files(encoderJson, vocabBpe)
  const sentences = brownParagraphs(40)
    .flatMap((p) => p.split(/(?<=[.!?]) /))
    .slice(0, 3000)

  test('produces the reference ids on thousands of sentences', () => {
    expect(sentences.length).toBe(3000)
    for (const s of sentences) expect(gpt2.encode(s)).toEqual(gptEncode(s))
    const odd = ["it's  2026!\n\n\tdone", 'naïve café — 東京 🚀', '   leading and trailing   ']
    for (const s of odd) expect(gpt2.encode(s)).toEqual(gptEncode(s))
  })

  test('loads as tokenizer.json with the same ids', () => {
    const json = JSON.parse(JSON.stringify(gpt2.toJSON()))
    expect(json.model.vocab.Ġthe).toBe(262)
    expect(json.added_tokens).toEqual([expect.objectContaining({ id: 50256, content: '<|endoftext|>', special: true })])
    // Hugging Face files of the GPT-2 era write merges as "left right" strings.
    json.model.merges = json.model.merges.map(([l, r]: [string, string]) => `${l} ${r}`)
    const loaded = BpeTokenizer.fromJSON(json)
    for (const s of sentences.slice(0, 300)) expect(loaded.encode(s)).toEqual(gptEncode(s))
  })
})

describe('bad tokenizer files', () => {
  test('a file that is not JSON is named', async () => {
    const path = join(dir, 'broken.json')
    writeFileSync(path, '{"model": ')
    await expect(BpeTokenizer.load(path)).rejects.toThrow(`${path}: not valid JSON`)
  })

  test('a WordPiece model is refused with the field named', () => {
    expect(() => BpeTokenizer.fromJSON({ model: { type: 'WordPiece' } }, 'bert.json')).toThrow(
      'bert.json: model.type is "WordPiece"; only "BPE" tokenizers are supported',
    )
  })

  test('a vocabulary without all 256 bytes is refused', () => {
    expect(() => new BpeTokenizer({ vocab: new Map([['a', 0]]), merges: [] })).toThrow(
      /lacks the single-byte token for byte 0/,
    )
  })

  test('a merge of unknown tokens names the merge', () => {
    const vocab = new Map(BYTE_TO_CHAR.map((ch, b) => [ch, b] as [string, number]))
    expect(() => new BpeTokenizer({ vocab, merges: [['a', 'b']] })).toThrow(/merge 0 \("a" "b"\) uses a token missing/)
  })

  test('an unknown id is refused when decoding', () => {
    const { encoderJson, vocabBpe } = gpt2Files()
    expect(() => BpeTokenizer.fromGpt2Files(encoderJson, vocabBpe).decode([60000])).toThrow(
      'token id 60000 is outside the vocabulary (size 50257)',
    )
  })
})
