/**
 * `tokenizer.json` layouts people download, against ids from an independent reference tokenizer
 * (test-fixtures/tokenizers/make_fixtures.py, which also wrote the tiny hand-made files):
 * Llama 3-style byte-level BPE (Split regex with `(?i:…)`, ignore_merges), Llama 2-style
 * SentencePiece BPE (Prepend/Replace normalizer, byte fallback) and Mistral-style (Metaspace),
 * with special and non-special added tokens.
 */
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { BpeTokenizer } from './bpe-tokenizer.js'
import { LLAMA3_PATTERN, compilePattern } from './pretokenize.js'

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../../test-fixtures/tokenizers')
type Case = { text: string; specials: 'ignore' | 'match'; ids: number[] }
const reference = JSON.parse(readFileSync(join(FIXTURES, 'reference-ids.json'), 'utf8')) as Record<string, Case[]>
const NAMES = ['llama3-style', 'llama2-style', 'mistral-style', 'qwen2-style'] as const
const load = (name: string) => BpeTokenizer.load(join(FIXTURES, `${name}.tokenizer.json`))

describe.each(NAMES)('%s tokenizer.json', (name) => {
  test('encodes every sample as the reference does', async () => {
    const tok = await load(name)
    for (const c of reference[name]!) {
      const what = `${JSON.stringify(c.text)} specials ${c.specials}`
      expect(tok.encode(c.text, { specials: c.specials }), what).toEqual(c.ids)
    }
  })

  test("with addSpecialTokens, the post-processor's template (BOS) surrounds the ids", async () => {
    const tok = await load(name)
    for (const c of reference[`${name} with special tokens`]!)
      expect(tok.encode(c.text, { specials: 'match', addSpecialTokens: true }), JSON.stringify(c.text)).toEqual(c.ids)
  })

  test('decodes the ids back to the text', async () => {
    const tok = await load(name)
    // As Hugging Face's Metaspace decoder does, the first space goes: the text's own when it had one (no ▁ added).
    const lossy = (t: string) =>
      name === 'mistral-style' ? t.replace(/^ /, '') : name === 'qwen2-style' ? t.normalize('NFC') : t
    for (const c of reference[name]!) if (c.specials === 'ignore') expect(tok.decode(c.ids)).toEqual(lossy(c.text))
  })

  test('saves a tokenizer.json that encodes the same', async () => {
    const tok = await load(name)
    const again = BpeTokenizer.fromJSON(JSON.parse(JSON.stringify(tok.toJSON())))
    for (const c of reference[name]!) expect(again.encode(c.text, { specials: c.specials })).toEqual(c.ids)
    for (const c of reference[`${name} with special tokens`]!)
      expect(again.encode(c.text, { specials: 'match', addSpecialTokens: true })).toEqual(c.ids)
  })
})

test('LLAMA3_PATTERN is the Split regex of a Llama 3 tokenizer.json', () => {
  const json = JSON.parse(readFileSync(join(FIXTURES, 'llama3-style.tokenizer.json'), 'utf8'))
  expect(json.pre_tokenizer.pretokenizers[0].pattern.Regex).toBe(LLAMA3_PATTERN)
})

test('(?i:…) groups, which JavaScript lacks, match either case', () => {
  const re = compilePattern("(?i:'s|'ll)|[a-z]+")
  expect("it'S I'LL x'Ll".match(re)).toEqual(['it', "'S", "'LL", 'x', "'Ll"])
  expect(() => compilePattern('(?i:[a-z')).toThrow()
})

test('SentencePiece-style: a character outside the vocabulary falls back to its UTF-8 byte tokens', async () => {
  const tok = await load('llama2-style')
  const ids = tok.encode('日')
  expect(ids.map((i) => tok.idToToken(i))).toEqual(['▁', '<0xE6>', '<0x97>', '<0xA5>'])
  expect(tok.decode(ids)).toBe('日')
})
